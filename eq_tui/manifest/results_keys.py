"""The results keys: `metrics:` (top level, phase, template or job), `goal:`, `group_over:` and
`on_complete:` (top level and phase; a phase inherits the top level's and overrides key by key,
`goal` merging metric by metric)."""

from __future__ import annotations

import re
from typing import Any

from eq_tui.manifest import schema
from eq_tui.manifest.model import Goal, MetricsSpec, ResultsSpec
from eq_tui.manifest.schema import Context
from eq_tui.manifest.yaml_lines import Path_

METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")


def parse_metrics(ctx: Context, raw: Any, path: Path_) -> MetricsSpec:
    """`{json: PATH}`, `{jsonl: PATH}`, `{csv: PATH}`, `{log: true}`, `{pattern: REGEX}`; several
    at once are merged (a file's value wins over the log's)."""
    spec = ctx.mapping(raw, path)
    ctx.check_keys(spec, schema.METRICS_KEYS, path)
    if not spec:
        ctx.fail("name at least one source: json, jsonl, csv, log or pattern", path)
    files = {key: ctx.string(spec[key], (*path, key)) if spec.get(key) is not None else None
             for key in ("json", "jsonl", "csv")}
    for key, value in files.items():
        if value is not None and not value.strip():
            ctx.fail(f"'{key}' needs a path", (*path, key))
    log = ctx.boolean(spec["log"], (*path, "log")) if spec.get("log") is not None else False
    pattern = None
    if spec.get("pattern") is not None:
        pattern = ctx.string(spec["pattern"], (*path, "pattern"))
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            ctx.fail(f"not a valid regular expression: {exc}", (*path, "pattern"))
        if not compiled.groupindex:
            ctx.fail("the pattern needs named groups, e.g. (?P<val_acc>[0-9.]+): each names "
                     "a metric", (*path, "pattern"))
        log = True
    return MetricsSpec(json=files["json"], jsonl=files["jsonl"], csv=files["csv"], log=log,
                       pattern=pattern)


def parse_results(ctx: Context, raw: dict[str, Any], path: Path_,
                  parent: ResultsSpec) -> ResultsSpec:
    goal = dict(parent.goal)
    if raw.get("goal") is not None:
        goal_path: Path_ = (*path, "goal")
        for name, way in ctx.mapping(raw["goal"], goal_path).items():
            key_path: Path_ = (*goal_path, str(name))
            if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
                ctx.fail(f"metric name {name!r} may use letters, digits, '_', '.', '/', '-'",
                         key_path)
            goal[name] = ctx.choice(way, ("max", "min"), key_path)  # type: ignore[assignment]
    group_over = parent.group_over
    if raw.get("group_over") is not None:
        group_over = ctx.identifier(raw["group_over"], (*path, "group_over"), "grid key")
    on_complete = None  # a phase's own: the top level's runs when the whole queue is done
    if raw.get("on_complete") is not None:
        on_complete = ctx.string(raw["on_complete"], (*path, "on_complete"))
        if not on_complete.strip():
            ctx.fail("on_complete needs a command", (*path, "on_complete"))
    goals: tuple[tuple[str, Goal], ...] = tuple(goal.items())
    return ResultsSpec(goal=goals, group_over=group_over, on_complete=on_complete)
