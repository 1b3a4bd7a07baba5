"""The manifest copy that `--detach --on HOST` leaves on the host, without the values of the
secrets written in the manifest (`{value: ..., secret: true}`).

In the copy each such entry reads `{from_env: NAME, secret: true}`, and its value goes with
the from_env/from_file ones over the SSH channel into the engine's memory. Only the `value`
key and its scalar change; every other byte is as written and every line keeps its number (a
value over several lines leaves blank lines), so an error about the copy points at the line
of the file you wrote. The copy is loaded again and compared before it is sent: one that
differs in anything else, or still holds a value, is refused here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import yaml

from eq_tui.errors import ManifestError
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import Manifest
from eq_tui.manifest.secrets import inline_secrets


@dataclass(frozen=True)
class ManifestCopy:
    data: bytes               # what goes to the host
    values: dict[str, str]    # NAME -> value, handed over beside the copy, never written


def copy_without_secrets(data: bytes, source: str) -> ManifestCopy:
    """The bytes of the manifest at `source` as the host gets them, and the values taken out."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError("the manifest is not UTF-8 text", path=source) from None
    manifest = load_manifest_text(text, source)
    names = inline_secrets(manifest)
    if not names:
        return ManifestCopy(data, {})
    edits: dict[int, tuple[int, str]] = {}  # start -> (end, replacement); an alias shares one
    lines: dict[str, int] = {}
    for name, key, value in _value_nodes(text, source, names):
        lines[name] = key.start_mark.line + 1
        breaks = value.end_mark.line - value.start_mark.line
        edits[key.start_mark.index] = (key.end_mark.index, '"from_env"')
        edits[value.start_mark.index] = (value.end_mark.index,
                                         json.dumps(name) + "\n" * breaks)
    copy = text
    for start, (end, replacement) in sorted(edits.items(), reverse=True):
        copy = copy[:start] + replacement + copy[end:]
    values = {name: manifest.env[name].value for name in names}
    _check(manifest, copy, source, values, lines)
    return ManifestCopy(copy.encode("utf-8"), values)


def _refusal(name: str, source: str, why: str, line: int | None = None) -> ManifestError:
    return ManifestError(
        f"this secret's value cannot be left out of the manifest copy --detach --on sends to "
        f"the host ({why}); read it with {{from_env: {name}}} or {{from_file: PATH}} instead",
        path=source, line=line, key_path=f"env.{name}")


def _value_nodes(text: str, source: str,
                 names: list[str]) -> list[tuple[str, yaml.Node, yaml.Node]]:
    """(name, the `value` key's node, its scalar's node) for each inline secret."""
    composed = text.replace("\t", " ") if source.lower().endswith(".json") else text
    root = yaml.compose(composed, Loader=yaml.SafeLoader)
    env = _child(root, "env")
    found: list[tuple[str, yaml.Node, yaml.Node]] = []
    for name in names:
        entry = _child(env, name)
        key_value = _entry(entry, "value")
        if key_value is None:
            raise _refusal(name, source, "it is not written as `value:` in env")
        key, value = key_value
        if not isinstance(value, yaml.ScalarNode):
            raise _refusal(name, source, "its value is not a plain scalar",
                           value.start_mark.line + 1)
        found.append((name, key, value))
    return found


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    pair = _entry(node, key)
    return pair[1] if pair is not None else None


def _entry(node: yaml.Node | None, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return key_node, value_node
    return None


def _check(manifest: Manifest, copy: str, source: str, values: dict[str, str],
           lines: dict[str, int]) -> None:
    """The copy is the same manifest, its inline secrets read from_env, and holds no value."""
    first = next(iter(values))
    try:
        loaded = load_manifest_text(copy, source)
    except ManifestError as exc:
        raise _refusal(first, source, f"the copy would not load: {exc.message}",
                       lines[first]) from None
    for name, value in values.items():
        var = loaded.env.get(name)
        if var is None or var.from_env != name:
            raise _refusal(name, source, "it comes through an anchor, alias or merge key",
                           lines[name])
        if value and value in copy:
            raise _refusal(name, source, "its value is also written elsewhere in the file",
                           lines[name])
    others = {name: var for name, var in manifest.env.items() if name not in values}
    if {**loaded.to_json(), "env": None} != {**manifest.to_json(), "env": None} or \
            {name: loaded.env.get(name) for name in others} != others:
        raise _refusal(first, source, "it is shared with other keys through an anchor or alias",
                       lines[first])
