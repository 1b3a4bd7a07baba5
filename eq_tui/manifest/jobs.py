"""Jobs of one scope (the top level or a phase): explicit `jobs`, then `grid` x `template`.

A scope's defaults (`default_cmd`, `args`, `preconditions`, `output_check`, `gpus_per_job`,
`mem_mib`, `exclusive`, ...) are inherited from the parent scope and overridden key by key;
`args` merge, a job's own `preconditions` replace the scope's. A job's command is its `cmd`
(else the scope's `default_cmd`) followed by the rendered args. Variables: the grid point,
then the job's scalar args (after their own substitution); a grid value wins over an arg of
the same name. A job's family (whose runs `mem_mib: auto` learns from) is `<phase>/template`
for a grid's jobs, else its phase.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eq_tui.manifest import schema
from eq_tui.manifest.checkpoint_keys import CheckpointAt, check_rendered_path, parse_checkpoint
from eq_tui.manifest.expand import (
    GRID_KEY,
    LAUNCH_TIME_VARS,
    MAX_GRID_POINTS,
    UndefinedVariable,
    describe_point,
    grid_points,
    grid_size,
    render_args,
    substitute,
    valid_arg_key,
)
from eq_tui.manifest.ids import ID_PATTERN
from eq_tui.manifest.model import (
    METRICS_FILE_KEYS,
    CheckpointSpec,
    JobSpec,
    MetricsSpec,
    Precondition,
)
from eq_tui.manifest.preempt_keys import PreemptKeys, parse_preempt_keys
from eq_tui.manifest.results_keys import HOST_PATTERN_KEYS, check_host_pattern, parse_metrics
from eq_tui.manifest.schema import Context
from eq_tui.manifest.sharing import Sharing, for_gpus, parse_sharing
from eq_tui.manifest.watch_keys import parse_on_stall, parse_stall_after
from eq_tui.manifest.yaml_lines import Path_

ArgValue = str | bool | None | list[str | bool]


@dataclass(frozen=True)
class Arg:
    value: ArgValue
    path: Path_  # where it was written, for errors


@dataclass(frozen=True)
class PreconditionAt:
    precondition: Precondition
    path: Path_


@dataclass
class Scope:
    """Defaults for the jobs of the top level or of one phase."""

    default_cmd: str | None = None
    default_cmd_path: Path_ = ()
    args: dict[str, Arg] = field(default_factory=dict)
    preconditions: tuple[PreconditionAt, ...] = ()
    output_check: str | None = None
    output_check_path: Path_ = ()
    gpus_per_job: int = 1
    gpus_per_job_path: Path_ = ()
    metrics: MetricsSpec | None = None
    metrics_path: Path_ = ()
    priority: int = 0
    stall_after: float | None = None
    on_stall: str = "alert"
    sharing: Sharing = field(default_factory=Sharing)
    checkpoint: CheckpointAt | None = None
    preemption: PreemptKeys = field(default_factory=PreemptKeys)


@dataclass(frozen=True)
class Origin:
    path: Path_  # the key an error about this job points at
    text: str  # how a message names where the job came from


def parse_scope(ctx: Context, raw: dict[str, Any], path: Path_, parent: Scope) -> Scope:
    scope = Scope(**{**parent.__dict__, "args": dict(parent.args)})
    if raw.get("default_cmd") is not None:
        scope.default_cmd_path = (*path, "default_cmd")
        scope.default_cmd = ctx.string(raw["default_cmd"], scope.default_cmd_path)
    if raw.get("args") is not None:
        scope.args.update(parse_args(ctx, raw["args"], (*path, "args")))
    if raw.get("preconditions") is not None:
        scope.preconditions = parse_preconditions(ctx, raw["preconditions"],
                                                  (*path, "preconditions"))
    if raw.get("output_check") is not None:
        scope.output_check_path = (*path, "output_check")
        scope.output_check = ctx.string(raw["output_check"], scope.output_check_path)
    if raw.get("gpus_per_job") is not None:
        scope.gpus_per_job_path = (*path, "gpus_per_job")
        scope.gpus_per_job = ctx.integer(raw["gpus_per_job"], scope.gpus_per_job_path,
                                         minimum=0)
    if raw.get("metrics") is not None:
        scope.metrics_path = (*path, "metrics")
        scope.metrics = parse_metrics(ctx, raw["metrics"], scope.metrics_path)
    if raw.get("priority") is not None:
        scope.priority = ctx.integer(raw["priority"], (*path, "priority"))
    scope.stall_after = parse_stall_after(ctx, raw, path, scope.stall_after)
    scope.on_stall = parse_on_stall(ctx, raw, path, scope.on_stall)
    scope.sharing = parse_sharing(ctx, raw, path, scope.sharing)
    scope.checkpoint = parse_checkpoint(ctx, raw, path, scope.checkpoint)
    scope.preemption = parse_preempt_keys(ctx, raw, path, scope.preemption)
    return scope


def parse_args(ctx: Context, raw: Any, path: Path_) -> dict[str, Arg]:
    args: dict[str, Arg] = {}
    for key, value in ctx.mapping(raw, path).items():
        arg_path: Path_ = (*path, str(key))
        if not isinstance(key, str) or not valid_arg_key(key):
            hint = " (write it without the leading --)" if str(key).startswith("-") else ""
            ctx.fail(f"argument name {key!r} may only use letters, digits, '_', '.', '-'{hint}",
                     arg_path)
        args[key] = Arg(_arg_value(ctx, value, arg_path), arg_path)
    return args


def _arg_value(ctx: Context, value: Any, path: Path_) -> ArgValue:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, list):
        return [_list_item(ctx, item, (*path, i)) for i, item in enumerate(value)]
    if isinstance(value, (int, float)):
        return ctx.scalar_text(value, path)
    ctx.fail("an argument value must be a string, number, boolean, null or a list of those",
             path)


def _list_item(ctx: Context, item: Any, path: Path_) -> str | bool:
    if isinstance(item, (bool, str)):
        return item
    if isinstance(item, (int, float)):
        return ctx.scalar_text(item, path)
    ctx.fail("a list argument holds strings, numbers or booleans", path)


def parse_preconditions(ctx: Context, raw: Any, path: Path_) -> tuple[PreconditionAt, ...]:
    result = []
    for i, item in enumerate(ctx.list_of(raw, path)):
        item_path: Path_ = (*path, i)
        pre = ctx.mapping(item, item_path)
        ctx.check_keys(pre, schema.PRECONDITION_KEYS, item_path)
        kind = ctx.choice(pre.get("type", "checkpoint_exists"), ("checkpoint_exists",),
                          (*item_path, "type"))
        if "path" not in pre:
            ctx.fail("a precondition needs a 'path'", item_path)
        where = ctx.string(pre["path"], (*item_path, "path"))
        result.append(PreconditionAt(Precondition(type=kind, path=where),  # type: ignore[arg-type]
                                     (*item_path, "path")))
    return tuple(result)


def parse_grid(ctx: Context, raw: Any, path: Path_) -> dict[str, list[str]]:
    grid: dict[str, list[str]] = {}
    for key, values in ctx.mapping(raw, path).items():
        key_path: Path_ = (*path, str(key))
        if not isinstance(key, str) or not GRID_KEY.fullmatch(key):
            ctx.fail(f"grid variable {key!r} must be a name like N or lr", key_path)
        if key in LAUNCH_TIME_VARS:
            ctx.fail(f"${{{key}}} is filled at launch time; pick another grid variable name",
                     key_path)
        items = ctx.list_of(values, key_path)
        if not items:
            ctx.fail(f"grid variable {key!r} has no values", key_path)
        grid[key] = [_grid_value(ctx, v, (*key_path, i)) for i, v in enumerate(items)]
    if not grid:
        ctx.fail("the grid is empty", path)
    if grid_size(grid) > MAX_GRID_POINTS:
        ctx.fail(f"the grid has {grid_size(grid)} points; at most {MAX_GRID_POINTS}", path)
    return grid


def _grid_value(ctx: Context, value: Any, path: Path_) -> str:
    if isinstance(value, (str, bool, int, float)):
        return ctx.scalar_text(value, path)
    ctx.fail("grid values must be strings, numbers or booleans", path)


class JobMaker:
    """Builds JobSpecs and keeps ids unique across every scope."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.origins: dict[str, Origin] = {}

    def scope_jobs(self, raw: dict[str, Any], path: Path_, scope: Scope,
                   phase: str) -> list[JobSpec]:
        ctx = self.ctx
        jobs: list[JobSpec] = []
        if raw.get("jobs") is not None:
            for i, item in enumerate(ctx.list_of(raw["jobs"], (*path, "jobs"))):
                item_path: Path_ = (*path, "jobs", i)
                entry = ctx.mapping(item, item_path)
                origin = Origin(item_path, ctx.origin(item_path))
                jobs.append(self.make_job(entry, item_path, origin, scope, phase, {},
                                          family=phase))
        if raw.get("template") is not None and raw.get("grid") is None:
            ctx.fail("'template' needs a 'grid' to expand", (*path, "template"))
        if raw.get("grid") is not None:
            jobs.extend(self._grid_jobs(raw, path, scope, phase))
        return jobs

    def _grid_jobs(self, raw: dict[str, Any], path: Path_, scope: Scope,
                   phase: str) -> list[JobSpec]:
        ctx = self.ctx
        grid_path: Path_ = (*path, "grid")
        template_path: Path_ = (*path, "template")
        grid = parse_grid(ctx, raw["grid"], grid_path)
        template = ctx.mapping(raw["template"], template_path) \
            if raw.get("template") is not None else {}
        jobs = []
        for point in grid_points(grid):
            origin = Origin(grid_path, f"grid point {describe_point(point)} of "
                                       f"{ctx.origin(grid_path)}")
            jobs.append(self.make_job(template, template_path, origin, scope, phase, point,
                                      family=f"{phase}/template"))
        return jobs

    def make_job(self, entry: dict[str, Any], path: Path_, origin: Origin, scope: Scope,
                 phase: str, point: dict[str, str], *, family: str) -> JobSpec:
        ctx = self.ctx
        ctx.check_keys(entry, schema.JOB_KEYS, path)
        args = dict(scope.args)
        if entry.get("args") is not None:
            args.update(parse_args(ctx, entry["args"], (*path, "args")))
        rendered = {key: self._sub_arg(arg, point) for key, arg in args.items()}
        variables = {k: v for k, v in rendered.items() if isinstance(v, str)}
        variables.update(point)
        job_id = self._job_id(entry, path, variables, point)
        cmd = self._command(entry, path, scope, variables, point, render_args(rendered), job_id)
        preconditions = scope.preconditions
        if entry.get("preconditions") is not None:
            preconditions = parse_preconditions(ctx, entry["preconditions"],
                                                (*path, "preconditions"))
        gpus_per_job, gpus_path = scope.gpus_per_job, scope.gpus_per_job_path
        if entry.get("gpus_per_job") is not None:
            gpus_path = (*path, "gpus_per_job")
            gpus_per_job = ctx.integer(entry["gpus_per_job"], gpus_path, minimum=0)
        sharing = for_gpus(ctx, parse_sharing(ctx, entry, path, scope.sharing), gpus_per_job,
                           gpus_path)
        priority = scope.priority
        if entry.get("priority") is not None:
            priority = ctx.integer(entry["priority"], (*path, "priority"))
        self._register(job_id, origin)
        return JobSpec(
            id=job_id, phase=phase, cmd=cmd,
            output_check=self._output_check(entry, path, scope, variables, point),
            preconditions=tuple(
                Precondition(type=p.precondition.type,
                             path=self._sub(p.precondition.path, variables, p.path, point))
                for p in preconditions),
            gpus_per_job=gpus_per_job, priority=priority,
            metrics=self._metrics(entry, path, scope, variables, point),
            params=tuple(point.items()),
            stall_after=parse_stall_after(ctx, entry, path, scope.stall_after),
            on_stall=parse_on_stall(ctx, entry, path, scope.on_stall),
            mem_mib=sharing.mem_mib, exclusive=sharing.exclusive, family=family,
            checkpoint=self._checkpoint(entry, path, scope, variables, point, job_id),
            **parse_preempt_keys(ctx, entry, path, scope.preemption).fields())

    def _checkpoint(self, entry: dict[str, Any], path: Path_, scope: Scope,
                    variables: dict[str, str], point: dict[str, str],
                    job_id: str) -> CheckpointSpec | None:
        at = parse_checkpoint(self.ctx, entry, path, scope.checkpoint)
        if at is None:
            return None
        variables = {"id": job_id, "JOB_ID": job_id, **variables}
        glob = self._sub(at.path, variables, (*at.where, "path"), point)
        check_rendered_path(self.ctx, glob, (*at.where, "path"), job_id)
        return CheckpointSpec(path=glob, resume=self._sub(at.resume, variables,
                                                          (*at.where, "resume"), point,
                                                          quote=True),
                              signal=at.signal, grace=at.grace)

    def _metrics(self, entry: dict[str, Any], path: Path_, scope: Scope,
                 variables: dict[str, str], point: dict[str, str]) -> MetricsSpec | None:
        if entry.get("metrics") is not None:
            where: Path_ = (*path, "metrics")
            spec = parse_metrics(self.ctx, entry["metrics"], where)
        elif scope.metrics is not None:
            where, spec = scope.metrics_path, scope.metrics
        else:
            return None
        files = {key: self._sub(value, variables, (*where, key), point)
                 for key in METRICS_FILE_KEYS if (value := getattr(spec, key)) is not None}
        for key in HOST_PATTERN_KEYS:
            if key in files:
                check_host_pattern(self.ctx, files[key], (*where, key))
        return MetricsSpec(**{**spec.__dict__, **files})

    def _sub(self, text: str, variables: dict[str, str], path: Path_, point: dict[str, str],
             *, quote: bool = False) -> str:
        try:
            return substitute(text, variables, quote=quote)
        except UndefinedVariable as exc:
            known = ", ".join(sorted(variables)) or "none here"
            where = f" (grid point {describe_point(point)})" if point else ""
            self.ctx.fail(f"undefined variable ${{{exc.name}}}{where}; defined: {known}; "
                          f"launch-time: {', '.join(sorted(LAUNCH_TIME_VARS))}; write "
                          f"$${{{exc.name}}} for a literal shell variable", path)

    def _sub_arg(self, arg: Arg, point: dict[str, str]) -> ArgValue:
        # Args see the grid point only: an arg referring to another arg would depend on order.
        if isinstance(arg.value, str):
            return self._sub(arg.value, point, arg.path, point)
        if isinstance(arg.value, list):
            return [self._sub(v, point, (*arg.path, i), point) if isinstance(v, str) else v
                    for i, v in enumerate(arg.value)]
        return arg.value

    def _job_id(self, entry: dict[str, Any], path: Path_, variables: dict[str, str],
                point: dict[str, str]) -> str:
        ctx = self.ctx
        if "id" not in entry:
            if not point:
                ctx.fail("every job needs an 'id'", path)
            raw_id = "_".join(f"{k}{v}" for k, v in point.items())
        else:
            raw_id = ctx.string(entry["id"], (*path, "id"), allow_numbers=True)
        job_id = self._sub(raw_id, variables, (*path, "id"), point)
        if not ID_PATTERN.fullmatch(job_id):
            where = f" (grid point {describe_point(point)})" if point else ""
            ctx.fail(f"job id {job_id!r}{where} may only use letters, digits, '_', '.', '-'",
                     (*path, "id") if "id" in entry else path)
        return job_id

    def _command(self, entry: dict[str, Any], path: Path_, scope: Scope,
                 variables: dict[str, str], point: dict[str, str], args: str,
                 job_id: str) -> str:
        ctx = self.ctx
        if entry.get("cmd") is not None:
            base_path: Path_ = (*path, "cmd")
            base = ctx.string(entry["cmd"], base_path)
        elif scope.default_cmd is not None:
            base_path, base = scope.default_cmd_path, scope.default_cmd
        else:
            ctx.fail(f"job {job_id!r} has no 'cmd' and there is no 'default_cmd'", path)
        cmd = " ".join(part for part in (
            self._sub(base, variables, base_path, point, quote=True).strip(), args) if part)
        if not cmd:
            ctx.fail(f"job {job_id!r} has an empty command", base_path)
        return cmd

    def _output_check(self, entry: dict[str, Any], path: Path_, scope: Scope,
                      variables: dict[str, str], point: dict[str, str]) -> str | None:
        if entry.get("output_check") is not None:
            check_path: Path_ = (*path, "output_check")
            check = self.ctx.string(entry["output_check"], check_path)
        elif scope.output_check is not None:
            check_path, check = scope.output_check_path, scope.output_check
        else:
            return None
        return self._sub(check, variables, check_path, point)

    def _register(self, job_id: str, origin: Origin) -> None:
        first = self.origins.get(job_id)
        if first is not None:
            self.ctx.fail(f"duplicate job id {job_id!r}: made by {origin.text} and by "
                          f"{first.text}", origin.path)
        self.origins[job_id] = origin
