"""The `search:` key (top level or a phase): a space Optuna samples, one trial at a time.

```yaml
search:
  space:
    lr: {low: 1.0e-4, high: 1.0, log: true}
    width: [64, 128, 256]
  trials: 24
  budget: {gpu_hours: 2}
  sampler: tpe        # tpe | gp | cmaes | random | qmc
  seed: 0
```

The scope's `template` is the trial's job: it uses the space's names and `${trial}` like grid
variables. A `grid` beside a search gives every trial each of its points (seeds); they are not
jobs of their own. The metric and its direction are `search.metric`/`search.goal`, else the
phase's single `goal`. Optuna itself is only looked for here, never imported.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import fields, replace
from typing import Any

from eq_tui.errors import ManifestError
from eq_tui.manifest import json_schema
from eq_tui.manifest.expand import GRID_KEY, LAUNCH_TIME_VARS
from eq_tui.manifest.jobs import JobMaker, Origin, Scope, parse_grid
from eq_tui.manifest.model import DEFAULT_PHASE, Goal, JobSpec, ResultsSpec, SearchParam, SearchSpec
from eq_tui.manifest.schema import Context
from eq_tui.manifest.search_early_stop import check_early_stop
from eq_tui.manifest.yaml_lines import Path_

SAMPLERS = ("tpe", "gp", "cmaes", "random", "qmc")
# what a sampler needs beyond Optuna itself
SAMPLER_NEEDS = {"gp": ("torch", "scipy"), "cmaes": ("cmaes",), "qmc": ("scipy",)}
TRIAL_VAR = "trial"
# what a trial job's ${id} and ${JOB_ID} in its checkpoint become: a name no space or grid
# may take (JOB_ID is filled by eq-tui)
ID_VAR = "JOB_ID"
INSTALL_HINT = "pip install 'eq-tui[search]'"
# scope keys a search takes over: its trials are made from them, not jobs of their own
TAKEN_KEYS = ("grid", "template")
SEARCH_KEYS = json_schema.keys("search")
_MARKED_POINT = re.compile(r"\(grid point [^)]*@@eqs\.[^)]*\)")


def marker(name: str) -> str:
    """What stands for `${name}` in the trial template until a trial's value is known:
    characters a shell, a path and a job id field leave alone."""
    return f"@@eqs.{name}@@"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: a module in sys.modules without a spec
        return False


def optuna_available() -> bool:
    return _installed("optuna")


def scope_without_search(raw: dict[str, Any]) -> dict[str, Any]:
    """The scope as its static jobs see it: with a search, its grid and template make trials."""
    if raw.get("search") is None:
        return raw
    return {key: value for key, value in raw.items() if key not in TAKEN_KEYS}


def parse_search(ctx: Context, raw: dict[str, Any], path: Path_, maker: JobMaker,
                 scope: Scope, phase: str, results: ResultsSpec) -> SearchSpec | None:
    if raw.get("search") is None:
        check_early_stop(ctx, raw, path, results, None)
        return None
    where: Path_ = (*path, "search")
    search = ctx.mapping(raw["search"], where)
    ctx.check_keys(search, SEARCH_KEYS, where)
    if not optuna_available():
        ctx.fail(f"a search needs Optuna, which is not installed: {INSTALL_HINT}", where)
    if "space" not in search:
        ctx.fail("a search needs a 'space': the names Optuna chooses and their ranges", where)
    space = _space(ctx, search["space"], (*where, "space"))
    trials, gpu_hours = _amount(ctx, search, where)
    metric, goal = _metric_goal(ctx, search, where, results)
    check_early_stop(ctx, raw, path, results, (metric, goal))
    grid = parse_grid(ctx, raw["grid"], (*path, "grid")) if raw.get("grid") is not None else {}
    for name in grid:
        if name in {p.name for p in space} or name == TRIAL_VAR:
            ctx.fail(f"{name!r} is both a grid variable and a name of the search",
                     (*path, "grid", name))
    if raw.get("template") is None:
        ctx.fail("a search needs a 'template': the job each trial runs", where)
    trial_job = _trial_job(ctx, raw, path, maker, scope, phase, space, grid)
    sampler = ctx.choice(search.get("sampler", "tpe"), SAMPLERS, (*where, "sampler"))
    missing = [module for module in SAMPLER_NEEDS.get(sampler, ()) if not _installed(module)]
    if missing:
        ctx.fail(f"sampler {sampler!r} needs {' and '.join(missing)}, not installed: pip "
                 f"install {' '.join(missing)}", (*where, "sampler"))
    seed = ctx.integer(search["seed"], (*where, "seed"), minimum=0) \
        if search.get("seed") is not None else None
    return SearchSpec(space=space, metric=metric, goal=goal, trial_job=trial_job,
                      trials=trials, gpu_hours=gpu_hours, sampler=sampler, seed=seed,
                      grid=tuple((k, tuple(v)) for k, v in grid.items()))


def _space(ctx: Context, raw: Any, path: Path_) -> tuple[SearchParam, ...]:
    space = ctx.mapping(raw, path)
    if not space:
        ctx.fail("the search space is empty", path)
    params = []
    for name, value in space.items():
        name_path: Path_ = (*path, str(name))
        if not isinstance(name, str) or not GRID_KEY.fullmatch(name):
            ctx.fail(f"search name {name!r} must be a name like lr or width", name_path)
        if name in LAUNCH_TIME_VARS or name == TRIAL_VAR:
            ctx.fail(f"${{{name}}} is filled by eq-tui; pick another name", name_path)
        if isinstance(value, list):
            params.append(_choices(ctx, name, value, name_path))
        elif isinstance(value, dict):
            params.append(_range(ctx, name, value, name_path))
        else:
            ctx.fail("expected a range {low, high, log?, step?} or a list of choices",
                     name_path)
    return tuple(params)


def _choices(ctx: Context, name: str, values: list[Any], path: Path_) -> SearchParam:
    if not values:
        ctx.fail(f"{name!r} has no choices", path)
    texts: list[str] = []
    for i, value in enumerate(values):
        if not isinstance(value, (str, bool, int, float)):
            ctx.fail("choices must be strings, numbers or booleans", (*path, i))
        text = ctx.scalar_text(value, (*path, i))
        if text in texts:
            ctx.fail(f"choice {text!r} is listed twice", (*path, i))
        texts.append(text)
    return SearchParam(name=name, choices=tuple(texts))


def _range(ctx: Context, name: str, spec: dict[str, Any], path: Path_) -> SearchParam:
    ctx.check_keys(spec, ("low", "high", "log", "step"), path)
    for key in ("low", "high"):
        if key not in spec:
            ctx.fail(f"a range needs '{key}'", path)
    low = ctx.number(spec["low"], (*path, "low"))
    high = ctx.number(spec["high"], (*path, "high"))
    if not low < high:
        ctx.fail(f"empty range: low ({low:g}) must be below high ({high:g})", path)
    log = ctx.boolean(spec["log"], (*path, "log")) if spec.get("log") is not None else False
    if log and low <= 0:
        ctx.fail(f"a log range must stay above 0, got low {low:g}", (*path, "low"))
    step = None
    if spec.get("step") is not None:
        step = ctx.number(spec["step"], (*path, "step"), strictly_positive=True)
        if log:
            ctx.fail("a range takes 'log' or 'step', not both", (*path, "step"))
        count = (high - low) / step
        # a step wider than the range leaves one value, an empty range as low == high is
        if round(count) < 1 or abs(count - round(count)) > 1e-9 * max(1.0, count):
            ctx.fail(f"step {step:g} does not divide the range {low:g}..{high:g}",
                     (*path, "step"))
    integer = all(isinstance(spec.get(key), int) and not isinstance(spec.get(key), bool)
                  for key in ("low", "high")) and (step is None or step == int(step))
    return SearchParam(name=name, low=low, high=high, log=log, step=step, integer=integer)


def _amount(ctx: Context, search: dict[str, Any], where: Path_) -> tuple[int | None,
                                                                         float | None]:
    trials = ctx.integer(search["trials"], (*where, "trials"), minimum=1) \
        if search.get("trials") is not None else None
    gpu_hours = None
    if search.get("budget") is not None:
        budget_path: Path_ = (*where, "budget")
        budget = ctx.mapping(search["budget"], budget_path)
        ctx.check_keys(budget, ("gpu_hours",), budget_path)
        if budget.get("gpu_hours") is None:
            ctx.fail("a budget needs 'gpu_hours'", budget_path)
        gpu_hours = ctx.number(budget["gpu_hours"], (*budget_path, "gpu_hours"),
                               strictly_positive=True)
    if trials is None and gpu_hours is None:
        ctx.fail("a search needs 'trials' or a 'budget' (or both): when to stop asking", where)
    return trials, gpu_hours


def _metric_goal(ctx: Context, search: dict[str, Any], where: Path_,
                 results: ResultsSpec) -> tuple[str, Goal]:
    goals = dict(results.goal)
    if search.get("metric") is not None:
        metric = ctx.string(search["metric"], (*where, "metric"))
    elif len(goals) == 1:
        metric = next(iter(goals))
    elif goals:
        ctx.fail(f"the goal names {len(goals)} metrics ({', '.join(goals)}); say which one "
                 "the search optimises with search.metric", where)
    else:
        ctx.fail("a search needs a metric to optimise: give a 'goal' ({val_acc: max}) or "
                 "search.metric and search.goal", where)
    if search.get("goal") is not None:
        goal = ctx.choice(search["goal"], ("max", "min"), (*where, "goal"))
    elif metric in goals:
        goal = goals[metric]
    else:
        ctx.fail(f"no direction for {metric!r}: give search.goal (max or min) or a 'goal' "
                 f"naming it", where)
    return metric, goal  # type: ignore[return-value]


def _trial_job(ctx: Context, raw: dict[str, Any], path: Path_, maker: JobMaker, scope: Scope,
               phase: str, space: tuple[SearchParam, ...],
               grid: dict[str, list[str]]) -> JobSpec:
    template_path: Path_ = (*path, "template")
    template = ctx.mapping(raw["template"], template_path)
    if template.get("id") is not None:
        ctx.fail("a search names its trials itself (t0, t1, ...): leave out 'id'",
                 (*template_path, "id"))
    names = [p.name for p in space] + list(grid) + [TRIAL_VAR]
    point = {name: marker(name) for name in names}
    # checked against every grid point's values by substitution: one render with markers
    origin = Origin(template_path, f"the search of {ctx.origin(template_path)}")
    # the trial's id until it is known (ids may not hold a marker's '@'): of a checkpoint
    # path's safe characters, and taken by no job of the manifest but a deliberate one
    stand_in = f"eqs-trial.{phase}"
    try:
        job = maker.make_job({**template, "id": stand_in}, template_path, origin,
                             scope, phase, point, family=f"{phase}/template")
    except ManifestError as exc:  # say "a search trial" and ${name}, not the markers
        message = _MARKED_POINT.sub("(a search trial)", exc.message)
        for name in names:
            message = message.replace(marker(name), f"${{{name}}}")
        trial_id = ("" if phase == DEFAULT_PHASE else f"{phase}-") + f"t${{{TRIAL_VAR}}}"
        raise ManifestError(message.replace(stand_in, trial_id), path=exc.path,
                            line=exc.line, key_path=exc.key_path) from None
    if job.checkpoint is not None:  # each trial saves under its own id, not the stand-in's
        job = replace(job, checkpoint=replace(
            job.checkpoint, path=job.checkpoint.path.replace(stand_in, marker(ID_VAR)),
            resume=job.checkpoint.resume.replace(stand_in, marker(ID_VAR))))
    # params holds every marker, used or not
    text = " ".join(str(getattr(job, f.name)) for f in fields(job) if f.name != "params")
    for param in space:
        if marker(param.name) not in text:
            ctx.fail(f"search name {param.name!r} is used by no command of the template: "
                     f"every trial would run the same; write ${{{param.name}}} in it",
                     (*path, "search", "space", param.name))
    for name in grid:
        if marker(name) not in text:
            ctx.fail(f"grid variable {name!r} is used by no command of the template",
                     (*path, "grid", name))
    return job
