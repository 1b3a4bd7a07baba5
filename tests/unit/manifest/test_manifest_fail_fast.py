"""The manifest keys of the fail-fast work: crash_guard and venv, and their errors (file, line,
key path)."""

from __future__ import annotations

import pytest

from eq_tui.errors import ManifestError
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import CrashGuard

JOBS = "jobs: [{id: a, cmd: 'python train.py'}]\n"


@pytest.mark.parametrize(("text", "expected"), [
    ("", CrashGuard()),
    ("crash_guard: false\n", CrashGuard(enabled=False)),
    ("crash_guard: true\n", CrashGuard()),
    ("crash_guard: {after: 5}\n", CrashGuard(after=5)),
    ("crash_guard: {after: 2, within: 90s}\n", CrashGuard(after=2, within=90.0)),
    ("crash_guard: {within: 2m}\n", CrashGuard(within=120.0)),
    ("crash_guard: {within: 45}\n", CrashGuard(within=45.0)),
    ("crash_guard: {within: 1}\n", CrashGuard(within=1.0)),
    ("crash_guard: {within: 0.5}\n", CrashGuard(within=0.5)),
])
def test_crash_guard_forms(text: str, expected: CrashGuard) -> None:
    assert load_manifest_text(JOBS + text, "m.yaml").crash_guard == expected


@pytest.mark.parametrize(("text", "message"), [
    ("crash_guard: {after: 0}\n", "m.yaml:2: crash_guard.after: must be at least 1, got 0"),
    ("crash_guard: {within: soon}\n",
     "m.yaml:2: crash_guard.within: expected a duration such as 60s, 2m or 1h, got 'soon'"),
    ("crash_guard: {within: 0s}\n", "m.yaml:2: crash_guard.within: must be longer than 0"),
    ("crash_guard:\n  aftr: 2\n", "m.yaml:3: crash_guard.aftr: unknown key 'aftr'; did you "
     "mean 'after'?"),
    ("crash_guard: 3\n", "m.yaml:2: crash_guard: expected false, true or a mapping"),
    ("crash_guard: {within: -5}\n", "m.yaml:2: crash_guard.within: must be at least 0, got -5"),
    ("crash_guard: {within: [5]}\n", "m.yaml:2: crash_guard.within: expected a number"),
    ("venv: [a]\n", "m.yaml:2: venv: expected a string, got a list"),
])
def test_crash_guard_and_venv_errors_name_file_line_and_key(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(JOBS + text, "m.yaml")
    assert str(caught.value).startswith(message)
    assert caught.value.exit_code == 2


def test_venv_is_kept_as_written() -> None:
    assert load_manifest_text(JOBS + "venv: .venv\n", "m.yaml").venv == ".venv"
