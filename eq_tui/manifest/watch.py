"""The keys that say how eq-tui watches running jobs: `stall_after` (a duration: "20m", "90s",
"1h", a number of seconds; 0 turns hang detection off) and `on_stall` (alert, restart, kill).
Both may be set at the top level, in a phase or on a job; the nearest wins."""

from __future__ import annotations

import re
from typing import Any

from eq_tui.manifest.schema import Context
from eq_tui.manifest.yaml_lines import Path_

ON_STALL = ("alert", "restart", "kill")
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(ctx: Context, value: Any, path: Path_) -> float:
    """Seconds from `20m`, `90s`, `1.5h`, `250ms` or a plain number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ctx.number(value, path, minimum=0)
    text = ctx.string(value, path)
    match = _DURATION.fullmatch(text)
    if match is None:
        ctx.fail(f"must be a duration such as '20m', '90s' or '1h', got {text!r}", path)
    return float(match.group(1)) * _UNIT[match.group(2)]


def parse_stall_after(ctx: Context, raw: dict[str, Any], path: Path_,
                      inherited: float | None) -> float | None:
    """None: the default window (max(10 min, 3 x the job's longest gap between log lines))."""
    if raw.get("stall_after") is None:
        return inherited
    return parse_duration(ctx, raw["stall_after"], (*path, "stall_after"))


def parse_on_stall(ctx: Context, raw: dict[str, Any], path: Path_, inherited: str) -> str:
    if raw.get("on_stall") is None:
        return inherited
    return ctx.choice(raw["on_stall"], ON_STALL, (*path, "on_stall"))
