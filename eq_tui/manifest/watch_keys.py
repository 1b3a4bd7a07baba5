"""The keys that say how eq-tui watches running jobs and whom it tells: `stall_after` (a
duration: "20m", "90s", "1h", a number of seconds; 0 turns hang detection off) and `on_stall`
(alert, restart, kill), set at the top level, in a phase or on a job (the nearest wins); and
the top-level `notify` list."""

from __future__ import annotations

import re
from typing import Any

from eq_tui.manifest import json_schema
from eq_tui.manifest.json_schema import NOTIFY_EVENTS
from eq_tui.manifest.model import NotifySpec
from eq_tui.manifest.schema import Context
from eq_tui.manifest.yaml_lines import Path_

ON_STALL = ("alert", "restart", "kill")
NOTIFY_KEYS = json_schema.keys("notify")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
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


def parse_notify(ctx: Context, raw: Any) -> tuple[NotifySpec, ...]:
    if raw is None:
        return ()
    specs = []
    for i, item in enumerate(ctx.list_of(raw, ("notify",))):
        path: Path_ = ("notify", i)
        if isinstance(item, dict) and True in item:
            # YAML 1.1 reads a bare `on:` key as the boolean true
            item = {("on" if key is True else key): value for key, value in item.items()}
        entry = ctx.mapping(item, path)
        ctx.check_keys(entry, NOTIFY_KEYS, path)
        if entry.get("on") is None:
            ctx.fail(f"needs 'on': a list of events among {', '.join(NOTIFY_EVENTS)}", path)
        on_raw = entry["on"] if isinstance(entry["on"], list) else [entry["on"]]
        on = tuple(ctx.choice(value, NOTIFY_EVENTS, (*path, "on", j))
                   for j, value in enumerate(on_raw))
        targets = [key for key in ("command", "url", "url_env") if entry.get(key) is not None]
        if len(targets) != 1:
            ctx.fail("give exactly one target: 'command', 'url' or 'url_env'", path)
        key = targets[0]
        value = ctx.string(entry[key], (*path, key))
        if key == "url":
            _check_url(ctx, value, (*path, key))
        if key == "url_env" and not _ENV_NAME.fullmatch(value):
            ctx.fail(f"must name an environment variable, got {value!r}", (*path, key))
        specs.append(NotifySpec(on=on, **{key: value}))
    return tuple(specs)


def _check_url(ctx: Context, url: str, path: Path_) -> None:
    """A URL written in the manifest may not carry a secret: credentials or a query string go
    in the environment (url_env)."""
    scheme, _, rest = url.partition("://")
    if scheme not in ("http", "https") or not rest:
        ctx.fail(f"must be an http:// or https:// URL, got {url!r}", path)
    authority = rest.split("/", 1)[0]
    if "@" in authority or "?" in rest:
        ctx.fail("a URL with credentials or a query string (a token) must not be written in "
                 "the manifest: put it in an environment variable and use 'url_env: NAME'",
                 path)
