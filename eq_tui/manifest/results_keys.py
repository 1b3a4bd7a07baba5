"""The results keys: `metrics:` (top level, phase, template or job), `goal:`, `group_over:`,
`on_complete:` and `early_stop:` (top level and phase; a phase inherits the top level's and
overrides key by key, `goal` merging metric by metric)."""

from __future__ import annotations

import re
from typing import Any

from eq_tui.manifest import schema
from eq_tui.manifest.model import (
    METRICS_FILE_KEYS,
    EarlyStopSpec,
    Goal,
    MetricsSpec,
    ResultsSpec,
)
from eq_tui.manifest.schema import Context
from eq_tui.manifest.yaml_lines import Path_

METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
# hyperband: Optuna's, for a search's trials only (search_keys.py checks)
EARLY_STOP_RULES = ("asha", "median", "hyperband")


def parse_metrics(ctx: Context, raw: Any, path: Path_) -> MetricsSpec:
    """`{json: PATH}`, `{jsonl: PATH}`, `{csv: PATH}`, `{hf_state: PATH}`, `{tensorboard: DIR}`,
    `{log: true}`, `{pattern: REGEX}`; several at once are merged (a file's value wins over the
    log's)."""
    spec = ctx.mapping(raw, path)
    ctx.check_keys(spec, schema.METRICS_KEYS, path)
    if not spec:
        ctx.fail("name at least one source: json, jsonl, csv, hf_state, tensorboard, log or "
                 "pattern", path)
    files = {key: ctx.string(spec[key], (*path, key)) if spec.get(key) is not None else None
             for key in METRICS_FILE_KEYS}
    for key, value in files.items():
        if value is not None and not value.strip():
            ctx.fail(f"'{key}' needs a path", (*path, key))
        if value is not None and key in HOST_PATTERN_KEYS:
            check_host_pattern(ctx, value, (*path, key))
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
                       pattern=pattern, hf_state=files["hf_state"],
                       tensorboard=files["tensorboard"])


# the keys whose path the host expands as a pattern (`*`, `?`, `[...]`): a path of the job's
# own, written plainly, variables `${NAME}` aside
HOST_PATTERN_KEYS = ("hf_state", "tensorboard")
_VARIABLE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_./*?\[\]~+@%=,: -]")


def check_host_pattern(ctx: Context, value: str, path: Path_) -> None:
    """A path or glob the host expands: never above the cwd (`..`), no shell metacharacters."""
    plain = _VARIABLE.sub("x", value)
    if ".." in plain.split("/"):
        ctx.fail(f"{value!r}: '..' is not allowed here; give a path under the job's cwd or an "
                 "absolute one", path)
    bad = _UNSAFE.search(plain)
    if bad is not None:
        ctx.fail(f"{value!r}: {bad.group(0)!r} is not allowed here: letters, digits, '_ . / - + "
                 "@ % = , :', spaces, '~/' and the glob characters '* ? [ ]' are", path)


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
    early_stop = parent.early_stop
    if "early_stop" in raw:
        early_stop = parse_early_stop(ctx, raw["early_stop"], (*path, "early_stop"), goal)
    return ResultsSpec(goal=goals, group_over=group_over, on_complete=on_complete,
                       early_stop=early_stop)


def parse_early_stop(ctx: Context, raw: Any, path: Path_,
                     goals: dict[str, Goal]) -> EarlyStopSpec | None:
    """`early_stop: {metric: val_acc, rule: asha, grace: 1, eta: 3}`; null or false: off (a
    phase turning off the top level's)."""
    if raw is None or raw is False:
        return None
    spec = ctx.mapping(raw, path)
    ctx.check_keys(spec, schema.EARLY_STOP_KEYS, path)
    if spec.get("metric") is None:
        ctx.fail("name the metric the jobs report, e.g. metric: val_acc", path)
    metric = ctx.string(spec["metric"], (*path, "metric"))
    if not METRIC_NAME.fullmatch(metric):
        ctx.fail(f"metric name {metric!r} may use letters, digits, '_', '.', '/', '-'",
                 (*path, "metric"))
    if spec.get("goal") is not None:
        way: Goal = ctx.choice(spec["goal"], ("max", "min"), (*path, "goal"))  # type: ignore
    elif metric in goals:
        way = goals[metric]
    else:
        ctx.fail(f"say which way {metric} is better: goal: max or goal: min (here, or in the "
                 f"goal: mapping)", path)
    rule = ctx.choice(spec.get("rule", "asha"), EARLY_STOP_RULES, (*path, "rule"))
    grace = ctx.integer(spec.get("grace", 1), (*path, "grace"), minimum=1)
    eta = ctx.integer(spec.get("eta", 3), (*path, "eta"), minimum=2)
    return EarlyStopSpec(metric=metric, goal=way, rule=rule,  # type: ignore[arg-type]
                         grace=grace, eta=eta)
