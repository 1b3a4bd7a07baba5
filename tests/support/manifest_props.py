"""What every manifest load must satisfy, whatever the input (shared by the loader fuzz tests).

The loader turns an unexpected exception into ManifestError("internal error ..."), so a bare
"raises ManifestError" proves nothing: these properties reject that message, and ask every
error to be located (`file:line:` or `file:`) and to name the key it is about.
"""

from __future__ import annotations

from eq_tui.errors import ManifestError
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import Manifest

# Errors with no key path to name: about the document as a whole, or about a top-level key
# that is not a string (the message quotes it).
NO_KEY_ERRORS = ("invalid YAML", "invalid JSON", "the manifest is empty",
                 "the manifest is too large", "the manifest nests too deeply", "no jobs",
                 "expected a mapping", "keys must be strings")


def check_error(exc: ManifestError, source: str) -> None:
    message = str(exc)
    assert "internal error" not in message, message
    assert exc.exit_code == 2
    assert exc.path == source, message
    where = f"{source}:{exc.line}:" if exc.line is not None else f"{source}:"
    assert message.startswith(where), message
    if exc.key_path:
        assert message.startswith(f"{where} {exc.key_path}: "), message
    else:
        assert exc.message.startswith(NO_KEY_ERRORS), f"no key path: {message}"
    assert "Traceback" not in message


def load_checked(text: str, source: str) -> Manifest | ManifestError:
    """Load `text`; a ManifestError is returned once it has passed check_error."""
    try:
        result = load_manifest_text(text, source)
    except ManifestError as exc:
        check_error(exc, source)
        return exc
    assert isinstance(result, Manifest) and result.jobs
    return result


# A manifest every loader must accept: the positive half of the fuzz properties (a loader
# that refused everything with a clean, located error would pass the negative half alone).
VALID_YAML = "jobs: [{id: a, cmd: x}]\n"
VALID_JSON = '{"default_cmd": "run", "jobs": [{"id": "a"}]}'


def assert_valid_loads(text: str = VALID_YAML, source: str = "valid.yaml") -> Manifest:
    """`text` (known to be valid) loads into a manifest with its jobs, not an error."""
    result = load_manifest_text(text, source)
    assert isinstance(result, Manifest) and [job.id for job in result.jobs] == ["a"], result
    return result
