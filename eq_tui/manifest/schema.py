"""Typed access to the raw manifest: every problem becomes a ManifestError with key path + line."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from typing import Any, NoReturn

from eq_tui.errors import ManifestError
from eq_tui.manifest import json_schema
from eq_tui.manifest.ids import ID_PATTERN
from eq_tui.manifest.yaml_lines import Located, Path_

# The known keys come from the JSON Schema, so the loader and `eq-tui schema` cannot drift.
TOP_KEYS = json_schema.keys("top")
HOST_KEYS = json_schema.keys("host")
SIMULATE_KEYS = json_schema.keys("simulate")
SLURM_KEYS = json_schema.keys("slurm")
OOM_KEYS = json_schema.keys("oom_retry")
CRASH_GUARD_KEYS = json_schema.keys("crash_guard")
JOB_KEYS = json_schema.keys("job")
PHASE_KEYS = json_schema.keys("phase")
EARLY_STOP_KEYS = json_schema.keys("early_stop")
RESULTS_KEYS = frozenset({"goal", "group_over", "on_complete", "early_stop"})
SCOPE_KEYS = PHASE_KEYS - RESULTS_KEYS - {"name", "depends_on", "on_dependency_failure"}
METRICS_KEYS = json_schema.keys("metrics")
PRECONDITION_KEYS = json_schema.keys("precondition")
ENV_KEYS = json_schema.env_var_keys()


def render_path(path: Path_) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _type_name(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    name = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)
    if isinstance(value, (bool, int, float, str)):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        return f"{name} ({shown})"
    return name


class Context:
    """Where the document came from and where each key is: every failure names both."""

    def __init__(self, source: str, located: Located) -> None:
        self.source = source
        self.lines = located.lines
        self.raw = located.raw

    def scalar_text(self, value: Any, path: Path_) -> str:
        """A scalar as the user wrote it: `0.10` stays `0.10`, `true` is `true`."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            return value
        return self.raw.get(path, str(value))

    def line(self, path: Path_) -> int | None:
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None

    def fail(self, message: str, path: Path_ = ()) -> NoReturn:
        raise ManifestError(message, path=self.source, line=self.line(path),
                            key_path=render_path(path))

    def check_keys(self, mapping: dict[str, Any], allowed: Iterable[str], path: Path_) -> None:
        allowed = sorted(allowed)
        for key in mapping:
            if not isinstance(key, str):
                self.fail(f"keys must be strings, not {_type_name(key)} {key!r}", path)
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else \
                    f"; known keys: {', '.join(allowed)}"
                self.fail(f"unknown key {key!r}{hint}", (*path, key))

    def expect(self, value: Any, kinds: tuple[type, ...], what: str, path: Path_) -> Any:
        if isinstance(value, bool) and bool not in kinds:
            self.fail(f"expected {what}, got {_type_name(value)}", path)
        if not isinstance(value, kinds):
            self.fail(f"expected {what}, got {_type_name(value)}", path)
        return value

    def mapping(self, value: Any, path: Path_) -> dict[str, Any]:
        result: dict[str, Any] = self.expect(value, (dict,), "a mapping", path)
        return result

    def list_of(self, value: Any, path: Path_) -> list[Any]:
        result: list[Any] = self.expect(value, (list,), "a list", path)
        return result

    def string(self, value: Any, path: Path_, *, allow_numbers: bool = False) -> str:
        if allow_numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
            return self.scalar_text(value, path)
        result: str = self.expect(value, (str,), "a string", path)
        return result

    def integer(self, value: Any, path: Path_, *, minimum: int | None = None) -> int:
        result: int = self.expect(value, (int,), "an integer", path)
        if minimum is not None and result < minimum:
            self.fail(f"must be at least {minimum}, got {result}", path)
        return result

    def number(self, value: Any, path: Path_, *, minimum: float | None = None,
               strictly_positive: bool = False) -> float:
        result = float(self.expect(value, (int, float), "a number", path))
        if not math.isfinite(result):
            self.fail(f"must be a finite number, got {value}", path)
        if strictly_positive and not result > 0:
            self.fail(f"must be greater than 0, got {value}", path)
        if minimum is not None and result < minimum:
            self.fail(f"must be at least {minimum}, got {value}", path)
        return result

    def identifier(self, value: Any, path: Path_, what: str) -> str:
        text = self.string(value, path, allow_numbers=True)
        if not ID_PATTERN.fullmatch(text):
            self.fail(f"{what} {text!r} may only use letters, digits, '_', '.', '-'", path)
        return text

    def origin(self, path: Path_) -> str:
        return f"{render_path(path) or 'the top level'} (line {self.line(path)})"

    def boolean(self, value: Any, path: Path_) -> bool:
        result: bool = self.expect(value, (bool,), "true or false", path)
        return result

    def choice(self, value: Any, choices: tuple[str, ...], path: Path_) -> str:
        text = self.string(value, path)
        if text not in choices:
            close = difflib.get_close_matches(text, choices, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            self.fail(f"must be one of {', '.join(choices)}, got {text!r}{hint}", path)
        return text
