"""Expansion helpers: `${var}` substitution, args rendering, grid products. Pure."""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Mapping
from typing import Any

LAUNCH_TIME_VARS = frozenset({"GPU", "RUN_DIR", "ATTEMPT", "JOB_ID"})
_VAR = re.compile(r"\$\$|\$\{([^}]*)\}")
_ARG_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
GRID_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_GRID_POINTS = 100_000


class UndefinedVariable(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def substitute(text: str, variables: Mapping[str, str], *, quote: bool = False) -> str:
    """Replace `${name}` from `variables`; launch-time names stay; `$$` is a literal `$`.

    With `quote` (for commands) each value is shell-quoted, so a grid or args value can never
    add shell syntax; `shlex.quote` leaves plain values such as `0.1` or `out/x.json` alone.
    """

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        if name in variables:
            return shlex.quote(variables[name]) if quote else variables[name]
        if name in LAUNCH_TIME_VARS:
            return match.group(0)
        raise UndefinedVariable(name)

    return _VAR.sub(replace, text)


def scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_args(args: Mapping[str, Any]) -> str:
    """`{seed: 200, fast: true, ids: [1, 2]}` -> `--seed 200 --fast --ids 1 2` (values quoted).

    `false` and null drop the flag (so a job can switch off a default arg); an empty list
    gives the bare flag.
    """
    parts: list[str] = []
    for key, value in args.items():
        if value is None or value is False:
            continue
        if value is True:
            parts.append(f"--{key}")
        elif isinstance(value, list):
            parts.append(f"--{key}")
            parts.extend(shlex.quote(scalar_text(item)) for item in value)
        else:
            parts += [f"--{key}", shlex.quote(scalar_text(value))]
    return " ".join(parts)


def valid_arg_key(key: str) -> bool:
    return bool(_ARG_KEY.fullmatch(key))


def grid_size(grid: Mapping[str, list[str]]) -> int:
    size = 1
    for values in grid.values():
        size *= len(values)
    return size


def grid_points(grid: Mapping[str, list[str]]) -> list[dict[str, str]]:
    """The Cartesian product in key order, the last key varying fastest."""
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True))
            for combo in itertools.product(*(grid[k] for k in keys))]


def describe_point(point: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items())
