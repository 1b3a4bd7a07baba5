"""Load YAML (or JSON) and remember the line of every key and list item, for error messages."""

from __future__ import annotations

import json
from typing import Any

import yaml

from eq_tui.errors import ManifestError

Path_ = tuple[str | int, ...]


def _walk(node: yaml.Node, path: Path_, lines: dict[Path_, int], source: str) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is None or key == "<<":
                continue
            line = key_node.start_mark.line + 1
            if key in seen:
                where = ".".join(str(p) for p in path)
                raise ManifestError(f"duplicate key {key!r} (first on line {seen[key]})",
                                    path=source, line=line,
                                    key_path=f"{where}.{key}" if where else key)
            seen[key] = line
            lines[(*path, key)] = line
            _walk(value_node, (*path, key), lines, source)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*path, index)] = item.start_mark.line + 1
            _walk(item, (*path, index), lines, source)


def load_with_lines(text: str, source: str) -> tuple[Any, dict[Path_, int]]:
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                raise ManifestError("the manifest is empty", path=source)
            lines: dict[Path_, int] = {(): node.start_mark.line + 1}
            _walk(node, (), lines, source)
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if source.endswith(".json"):
            try:
                json.loads(text)
            except json.JSONDecodeError as jexc:
                raise ManifestError(f"invalid JSON: {jexc.msg}", path=source,
                                    line=jexc.lineno) from None
        raise ManifestError(f"invalid YAML: {problem}", path=source,
                            line=mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"invalid YAML: {exc}", path=source) from None
    except RecursionError:
        raise ManifestError("the manifest nests too deeply", path=source) from None
    return data, lines
