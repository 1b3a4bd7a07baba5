"""Parse YAML (or JSON) and remember where things are: the line of every key and list item,
and the source text of every plain non-string scalar (so `time: 04:00:00` or `conda: 3.10`
can be read back exactly as written)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from eq_tui.errors import ManifestError

Path_ = tuple[str | int, ...]

# Aliases share nodes, so walking the node graph of an alias bomb is exponential; stop early.
_MAX_NODES = 200_000


@dataclass
class Located:
    """The parsed document, plus the line of each key path and raw text of plain scalars."""

    data: Any
    lines: dict[Path_, int] = field(default_factory=dict)
    raw: dict[Path_, str] = field(default_factory=dict)


class LineLoader(yaml.SafeLoader):
    """A SafeLoader that also records where each mapping key and list item starts."""

    def __init__(self, text: str, source: str) -> None:
        super().__init__(text)
        self.source = source
        self.lines: dict[Path_, int] = {}
        self.raw: dict[Path_, str] = {}
        self._budget = _MAX_NODES

    def record(self, node: yaml.Node, path: Path_) -> None:
        self._budget -= 1
        if self._budget < 0:
            raise ManifestError("the manifest is too large (too many nodes or aliases)",
                                path=self.source)
        if isinstance(node, yaml.MappingNode):
            self._record_mapping(node, path)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self.lines[(*path, index)] = item.start_mark.line + 1
                self.record(item, (*path, index))
        elif isinstance(node, yaml.ScalarNode) and node.style is None \
                and node.tag != "tag:yaml.org,2002:str":
            self.raw[path] = node.value

    def _record_mapping(self, node: yaml.MappingNode, path: Path_) -> None:
        self.flatten_mapping(node)  # resolve `<<` merge keys the way construction will
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # construction rejects or keeps it; check_keys reports it by type
            key, line = key_node.value, key_node.start_mark.line + 1
            if key in seen:
                raise ManifestError(f"duplicate key {key!r} (first on line {seen[key]})",
                                    path=self.source, line=line,
                                    key_path=_render((*path, key)))
            seen[key] = line
            self.lines[(*path, key)] = line
            self.record(value_node, (*path, key))


def _render(path: Path_) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p)
                   for i, p in enumerate(path))


def _compose(text: str, source: str, *, construct: bool) -> Located:
    loader = LineLoader(text, source)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ManifestError("the manifest is empty", path=source)
        loader.lines[()] = node.start_mark.line + 1
        loader.record(node, ())
        data = loader.construct_document(node) if construct else None
        return Located(data, loader.lines, loader.raw)
    finally:
        loader.dispose()


def _yaml_error(exc: yaml.YAMLError, text: str, source: str, kind: str) -> ManifestError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "syntax error"
        return ManifestError(f"invalid {kind}: {problem}", path=source,
                             line=mark.line + 1 if mark else None)
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        return ManifestError(f"invalid {kind}: unacceptable character #x{exc.character:04x}",
                             path=source, line=line)
    return ManifestError(f"invalid {kind}: {exc}", path=source)


def load_yaml(text: str, source: str) -> Located:
    try:
        return _compose(text, source, construct=True)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, source, "YAML") from None
    except RecursionError:
        raise ManifestError("the manifest nests too deeply", path=source) from None


def load_json(text: str, source: str) -> Located:
    """Values by JSON's rules (YAML 1.1 reads `1e5` as a string); lines from the YAML parser."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"invalid JSON: {exc.msg}", path=source, line=exc.lineno) from None
    except RecursionError:
        raise ManifestError("the manifest nests too deeply", path=source) from None
    if data is None:
        raise ManifestError("the manifest is empty (null)", path=source)
    try:
        # Valid JSON has tabs only between tokens, where YAML's scanner rejects them.
        located = _compose(text.replace("\t", " "), source, construct=False)
    except (yaml.YAMLError, RecursionError):
        located = Located(None, {(): 1})
    located.data = data
    return located


def load_with_lines(text: str, source: str) -> Located:
    if source.lower().endswith(".json"):
        return load_json(text, source)
    return load_yaml(text, source)
