"""Read a manifest (YAML or JSON) into a validated, expanded Manifest.

Job sources, in order, inside the top level or inside each phase: `jobs` (each with `id` and
`cmd`, or `args` appended to `default_cmd`), then `grid` + `template`. With `phases`, jobs
live in the phases: top-level `jobs`/`grid`/`template` are an error, while top-level
`default_cmd`, `args`, `preconditions`, `output_check` and `gpus_per_job` are defaults every
phase inherits. `${var}` takes grid values and the job's own args; `${GPU}`, `${RUN_DIR}`,
`${ATTEMPT}` and `${JOB_ID}` are filled at launch; `$$` writes a literal `$`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eq_tui.engine.naming import ID_PATTERN
from eq_tui.errors import ManifestError
from eq_tui.manifest import schema
from eq_tui.manifest.expand import (
    UndefinedVariable,
    grid_points,
    render_args,
    scalar_text,
    substitute,
    valid_arg_key,
)
from eq_tui.manifest.model import (
    DEFAULT_PHASE,
    EnvVar,
    HostSpec,
    JobSpec,
    Manifest,
    OomRetry,
    PhaseSpec,
    Precondition,
    SimulateSpec,
    SlurmSpec,
)
from eq_tui.manifest.schema import Context
from eq_tui.manifest.yaml_lines import Path_, load_with_lines

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SSH_TARGET = re.compile(r"(?:([^@\s]+)@)?([^@:\s]+)(?::(\d+))?")


def load_manifest(path: str | Path) -> Manifest:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError("no such file", path=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"cannot read the manifest: {exc}", path=source) from None
    return load_manifest_text(text, source)


def load_manifest_text(text: str, source: str) -> Manifest:
    data, lines = load_with_lines(text, source)
    ctx = Context(source, lines)
    try:
        return _Builder(ctx, data).build()
    except ManifestError:
        raise
    except RecursionError:
        raise ManifestError("the manifest nests too deeply", path=source) from None


@dataclass
class _Scope:
    """Defaults that apply to the jobs of the top level or of one phase."""

    default_cmd: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    preconditions: tuple[Precondition, ...] = ()
    output_check: str | None = None
    gpus_per_job: int = 1


class _Builder:
    def __init__(self, ctx: Context, data: Any) -> None:
        self.ctx = ctx
        self.top = ctx.mapping(data, ())
        self.origins: dict[str, Path_] = {}

    # ---- top level -----------------------------------------------------------------------

    def build(self) -> Manifest:
        ctx, top = self.ctx, self.top
        ctx.check_keys(top, schema.TOP_KEYS, ())
        project = self._project()
        hosts = self._hosts()
        scope = self._scope(top, (), _Scope())
        phases, jobs = self._phases_and_jobs(scope)
        gpus_per_job = scope.gpus_per_job
        self._check_gpus_fit(jobs, hosts)
        oom = OomRetry()
        if "oom_retry" in top:
            raw = ctx.mapping(top["oom_retry"], ("oom_retry",))
            ctx.check_keys(raw, schema.OOM_KEYS, ("oom_retry",))
            oom = OomRetry(
                delay=ctx.number(raw.get("delay", oom.delay), ("oom_retry", "delay"),
                                 minimum=0),
                max_attempts=ctx.integer(raw.get("max_attempts", oom.max_attempts),
                                         ("oom_retry", "max_attempts"), minimum=1))
        return Manifest(
            project=project, source=ctx.source,
            cwd=self._opt_str("cwd"), conda=self._opt_str("conda"),
            conda_hook=self._opt_str("conda_hook"), env=self._env(), hosts=hosts,
            gpu_free_threshold_mib=ctx.integer(top.get("gpu_free_threshold_mib", 500),
                                               ("gpu_free_threshold_mib",), minimum=1),
            gpus_per_job=gpus_per_job,
            launcher=ctx.choice(top.get("launcher", "screen"), ("screen", "tmux"),
                                ("launcher",)),  # type: ignore[arg-type]
            waves=ctx.choice(top.get("waves", "rolling"), ("rolling", "strict"),
                             ("waves",)),  # type: ignore[arg-type]
            oom_retry=oom,
            poll=ctx.number(top["poll"], ("poll",), strictly_positive=True)
            if "poll" in top else None,
            stale_grace_s=ctx.number(top.get("stale_grace_s", 5.0), ("stale_grace_s",),
                                     minimum=0),
            retry_delay_s=ctx.number(top.get("retry_delay_s", 30.0), ("retry_delay_s",),
                                     minimum=0),
            phases=phases, jobs=tuple(jobs))

    def _opt_str(self, key: str) -> str | None:
        if key not in self.top or self.top[key] is None:
            return None
        return self.ctx.string(self.top[key], (key,))

    def _project(self) -> str:
        if "project" in self.top:
            project = self.ctx.string(self.top["project"], ("project",), allow_numbers=True)
            if not ID_PATTERN.fullmatch(project):
                self.ctx.fail(f"project {project!r} may only use letters, digits, '_', '.', '-'",
                              ("project",))
            return project
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(self.ctx.source).stem).strip("-.")
        return stem or "eq-tui"

    def _env(self) -> dict[str, EnvVar]:
        if "env" not in self.top or self.top["env"] is None:
            return {}
        ctx = self.ctx
        raw = ctx.mapping(self.top["env"], ("env",))
        env: dict[str, EnvVar] = {}
        for name, value in raw.items():
            path: Path_ = ("env", name)
            if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
                ctx.fail(f"{name!r} is not a valid environment variable name", path)
            if isinstance(value, dict):
                ctx.check_keys(value, schema.ENV_KEYS, path)
                if "value" not in value:
                    ctx.fail("needs a 'value'", path)
                env[name] = EnvVar(
                    value=ctx.string(value["value"], (*path, "value"), allow_numbers=True),
                    secret=ctx.boolean(value.get("secret", False), (*path, "secret")))
            elif isinstance(value, bool):
                env[name] = EnvVar(scalar_text(value))
            else:
                env[name] = EnvVar(ctx.string(value, path, allow_numbers=True))
        return env

    # ---- hosts ---------------------------------------------------------------------------

    def _gpu_list(self, value: Any, path: Path_) -> tuple[int, ...] | None:
        if value == "all":
            return None
        items = self.ctx.list_of(value, path)
        gpus = tuple(self.ctx.integer(g, (*path, i), minimum=0) for i, g in enumerate(items))
        if not gpus:
            self.ctx.fail("the GPU list is empty (use 'all' for every GPU)", path)
        if len(set(gpus)) != len(gpus):
            self.ctx.fail("a GPU is listed twice", path)
        return gpus

    def _hosts(self) -> tuple[HostSpec, ...]:
        ctx, top = self.ctx, self.top
        default_gpus = self._gpu_list(top["gpus"], ("gpus",)) if "gpus" in top else None
        default_parallel = ctx.integer(top.get("max_parallel", 8), ("max_parallel",), minimum=1)
        if "ssh" in top and "hosts" in top:
            ctx.fail("give either 'ssh' (one host) or 'hosts' (a list), not both", ("ssh",))
        if "ssh" in top:
            target = ctx.string(top["ssh"], ("ssh",))
            match = _SSH_TARGET.fullmatch(target)
            if not match:
                ctx.fail(f"{target!r} is not an ssh alias or [user@]host[:port]", ("ssh",))
            name = re.sub(r"[^A-Za-z0-9_.-]+", "-", match.group(2)).strip("-") or "host"
            return (HostSpec(name=name, ssh=target, gpus=default_gpus,
                             max_parallel=default_parallel),)
        if "hosts" not in top:
            return (HostSpec(name="local", gpus=default_gpus, max_parallel=default_parallel),)
        raw_hosts = ctx.list_of(top["hosts"], ("hosts",))
        if not raw_hosts:
            ctx.fail("the host list is empty", ("hosts",))
        hosts: list[HostSpec] = []
        seen: dict[str, int] = {}
        for i, raw in enumerate(raw_hosts):
            path: Path_ = ("hosts", i)
            host = ctx.mapping(raw, path)
            ctx.check_keys(host, schema.HOST_KEYS, path)
            if "name" not in host:
                ctx.fail("every host needs a 'name'", path)
            name = ctx.string(host["name"], (*path, "name"), allow_numbers=True)
            if not ID_PATTERN.fullmatch(name):
                ctx.fail(f"host name {name!r} may only use letters, digits, '_', '.', '-'",
                         (*path, "name"))
            if name in seen:
                ctx.fail(f"host name {name!r} is used twice (also hosts[{seen[name]}])",
                         (*path, "name"))
            seen[name] = i
            kinds = [k for k in ("ssh", "simulate", "slurm") if host.get(k) is not None]
            if len(kinds) > 1:
                ctx.fail(f"a host is one of ssh, simulate or slurm, not {' and '.join(kinds)}",
                         (*path, kinds[1]))
            ssh = ctx.string(host["ssh"], (*path, "ssh")) if host.get("ssh") else None
            if ssh is not None and not _SSH_TARGET.fullmatch(ssh):
                ctx.fail(f"{ssh!r} is not an ssh alias or [user@]host[:port]", (*path, "ssh"))
            hosts.append(HostSpec(
                name=name, ssh=ssh,
                gpus=self._gpu_list(host["gpus"], (*path, "gpus")) if "gpus" in host
                else default_gpus,
                max_parallel=ctx.integer(host.get("max_parallel", default_parallel),
                                         (*path, "max_parallel"), minimum=1),
                simulate=self._simulate(host["simulate"], (*path, "simulate"))
                if host.get("simulate") is not None else None,
                slurm=self._slurm(host["slurm"], (*path, "slurm"))
                if host.get("slurm") is not None else None,
                log_dir=ctx.string(host["log_dir"], (*path, "log_dir"))
                if host.get("log_dir") else None))
        return tuple(hosts)

    def _simulate(self, raw: Any, path: Path_) -> SimulateSpec:
        ctx = self.ctx
        sim = ctx.mapping(raw, path)
        ctx.check_keys(sim, schema.SIMULATE_KEYS, path)
        base = SimulateSpec()
        return SimulateSpec(
            gpus=ctx.integer(sim.get("gpus", base.gpus), (*path, "gpus"), minimum=1),
            memory_mib=ctx.integer(sim.get("memory_mib", base.memory_mib),
                                   (*path, "memory_mib"), minimum=1),
            model=ctx.string(sim.get("model", base.model), (*path, "model")),
            linger_s=ctx.number(sim.get("linger_s", base.linger_s), (*path, "linger_s"),
                                minimum=0))

    def _slurm(self, raw: Any, path: Path_) -> SlurmSpec:
        ctx = self.ctx
        slurm = ctx.mapping(raw, path)
        ctx.check_keys(slurm, schema.SLURM_KEYS, path)

        def text(key: str) -> str | None:
            value = slurm.get(key)
            return None if value is None else ctx.string(value, (*path, key), allow_numbers=True)

        extra = slurm.get("sbatch_args") or []
        return SlurmSpec(
            ssh=text("ssh"), partition=text("partition"), account=text("account"),
            qos=text("qos"), time=text("time"), mem=text("mem"),
            cpus_per_task=ctx.integer(slurm["cpus_per_task"], (*path, "cpus_per_task"),
                                      minimum=1) if slurm.get("cpus_per_task") else None,
            sbatch_args=tuple(ctx.string(a, (*path, "sbatch_args", i), allow_numbers=True)
                              for i, a in enumerate(ctx.list_of(extra,
                                                                (*path, "sbatch_args")))))

    # ---- jobs ----------------------------------------------------------------------------

    def _scope(self, raw: dict[str, Any], path: Path_, parent: _Scope) -> _Scope:
        ctx = self.ctx
        scope = _Scope(default_cmd=parent.default_cmd, args=dict(parent.args),
                       preconditions=parent.preconditions, output_check=parent.output_check,
                       gpus_per_job=parent.gpus_per_job)
        if raw.get("default_cmd") is not None:
            scope.default_cmd = ctx.string(raw["default_cmd"], (*path, "default_cmd"))
        if raw.get("args") is not None:
            scope.args.update(self._args(raw["args"], (*path, "args")))
        if raw.get("preconditions") is not None:
            scope.preconditions = self._preconditions(raw["preconditions"],
                                                      (*path, "preconditions"), {})
        if raw.get("output_check") is not None:
            scope.output_check = ctx.string(raw["output_check"], (*path, "output_check"))
        if raw.get("gpus_per_job") is not None:
            scope.gpus_per_job = ctx.integer(raw["gpus_per_job"], (*path, "gpus_per_job"),
                                             minimum=1)
        return scope

    def _args(self, raw: Any, path: Path_) -> dict[str, Any]:
        ctx = self.ctx
        args = ctx.mapping(raw, path)
        for key, value in args.items():
            if not isinstance(key, str) or not valid_arg_key(key):
                ctx.fail(f"argument name {key!r} may only use letters, digits, '_', '.', '-'",
                         (*path, str(key)))
            items = value if isinstance(value, list) else [value]
            for i, item in enumerate(items):
                if item is not None and not isinstance(item, (str, int, float, bool)):
                    where = (*path, key, i) if isinstance(value, list) else (*path, key)
                    ctx.fail("an argument value must be a string, number, boolean or a list "
                             "of those", where)
        return args

    def _preconditions(self, raw: Any, path: Path_,
                       variables: dict[str, str]) -> tuple[Precondition, ...]:
        ctx = self.ctx
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
            result.append(Precondition(type=kind, path=where))  # type: ignore[arg-type]
        return tuple(result)

    def _sub(self, text: str, variables: dict[str, str], path: Path_) -> str:
        try:
            return substitute(text, variables)
        except UndefinedVariable as exc:
            known = ", ".join(sorted(variables)) or "none here"
            self.ctx.fail(f"undefined variable ${{{exc.name}}} (defined: {known}; write "
                          f"$${{{exc.name}}} for a literal shell variable)", path)

    def _make_job(self, entry: dict[str, Any], path: Path_, origin: Path_, scope: _Scope,
                  phase: str, grid_vars: dict[str, str]) -> JobSpec:
        ctx = self.ctx
        ctx.check_keys(entry, schema.JOB_KEYS, path)
        args = dict(scope.args)
        if entry.get("args") is not None:
            args.update(self._args(entry["args"], (*path, "args")))
        variables = {k: scalar_text(v) for k, v in args.items()
                     if isinstance(v, (str, int, float)) and not isinstance(v, bool)}
        variables.update(grid_vars)
        rendered: dict[str, Any] = {}
        for key, value in args.items():
            if isinstance(value, str):
                rendered[key] = self._sub(value, variables, (*path, "args", key))
            elif isinstance(value, list):
                rendered[key] = [self._sub(v, variables, (*path, "args", key, i))
                                 if isinstance(v, str) else v for i, v in enumerate(value)]
            else:
                rendered[key] = value
        variables.update({k: scalar_text(v) for k, v in rendered.items()
                          if isinstance(v, (str, int, float)) and not isinstance(v, bool)})
        variables.update(grid_vars)
        if "id" not in entry:
            if not grid_vars:
                ctx.fail("every job needs an 'id'", path)
            raw_id = "_".join(f"{k}{v}" for k, v in grid_vars.items())
        else:
            raw_id = ctx.string(entry["id"], (*path, "id"), allow_numbers=True)
        job_id = self._sub(raw_id, variables, (*path, "id"))
        if not ID_PATTERN.fullmatch(job_id):
            ctx.fail(f"job id {job_id!r} may only use letters, digits, '_', '.', '-'",
                     (*path, "id"))
        if entry.get("cmd") is not None:
            base = self._sub(ctx.string(entry["cmd"], (*path, "cmd")), variables, (*path, "cmd"))
        elif scope.default_cmd is not None:
            base = self._sub(scope.default_cmd, variables, (*path, "cmd"))
        else:
            ctx.fail(f"job {job_id!r} has no 'cmd' and there is no 'default_cmd'", path)
        rendered_args = render_args(rendered)
        cmd = f"{base} {rendered_args}".strip() if rendered_args else base.strip()
        if not cmd:
            ctx.fail(f"job {job_id!r} has an empty command", (*path, "cmd"))
        output_check = scope.output_check
        if entry.get("output_check") is not None:
            output_check = ctx.string(entry["output_check"], (*path, "output_check"))
        if output_check is not None:
            output_check = self._sub(output_check, variables, (*path, "output_check"))
        preconditions = scope.preconditions
        if entry.get("preconditions") is not None:
            preconditions = self._preconditions(entry["preconditions"],
                                                (*path, "preconditions"), variables)
        preconditions = tuple(
            Precondition(type=p.type, path=self._sub(p.path, variables,
                                                     (*path, "preconditions")))
            for p in preconditions)
        gpus_per_job = scope.gpus_per_job
        if entry.get("gpus_per_job") is not None:
            gpus_per_job = ctx.integer(entry["gpus_per_job"], (*path, "gpus_per_job"),
                                       minimum=1)
        if job_id in self.origins:
            first = self.origins[job_id]
            ctx.fail(f"duplicate job id {job_id!r}: also made by {schema.render_path(first)} "
                     f"(line {ctx.line(first)})", origin)
        self.origins[job_id] = origin
        return JobSpec(id=job_id, phase=phase, cmd=cmd, output_check=output_check,
                       preconditions=preconditions, gpus_per_job=gpus_per_job)

    def _scope_jobs(self, raw: dict[str, Any], path: Path_, scope: _Scope,
                    phase: str) -> list[JobSpec]:
        ctx = self.ctx
        jobs: list[JobSpec] = []
        if raw.get("jobs") is not None:
            for i, item in enumerate(ctx.list_of(raw["jobs"], (*path, "jobs"))):
                item_path: Path_ = (*path, "jobs", i)
                entry = ctx.mapping(item, item_path)
                jobs.append(self._make_job(entry, item_path, item_path, scope, phase, {}))
        has_grid = raw.get("grid") is not None
        has_template = raw.get("template") is not None
        if has_template and not has_grid:
            ctx.fail("'template' needs a 'grid' to expand", (*path, "template"))
        if has_grid:
            grid_path: Path_ = (*path, "grid")
            grid = ctx.mapping(raw["grid"], grid_path)
            if not grid:
                ctx.fail("the grid is empty", grid_path)
            for key, values in grid.items():
                if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                    ctx.fail(f"grid variable {key!r} must be a name like N or lr",
                             (*grid_path, str(key)))
                values = ctx.list_of(values, (*grid_path, key))
                if not values:
                    ctx.fail(f"grid variable {key!r} has no values", (*grid_path, key))
                for i, value in enumerate(values):
                    if not isinstance(value, (str, int, float, bool)):
                        ctx.fail("grid values must be strings, numbers or booleans",
                                 (*grid_path, key, i))
            template = ctx.mapping(raw["template"], (*path, "template")) if has_template \
                else {}
            template_path: Path_ = (*path, "template")
            for point in grid_points(grid):
                jobs.append(self._make_job(template, template_path, grid_path, scope, phase,
                                           point))
        return jobs

    def _phases_and_jobs(self, top_scope: _Scope) -> tuple[tuple[PhaseSpec, ...],
                                                           list[JobSpec]]:
        ctx, top = self.ctx, self.top
        if top.get("phases") is None:
            flat = self._scope_jobs(top, (), top_scope, DEFAULT_PHASE)
            if not flat:
                ctx.fail("no jobs: give 'jobs', 'grid' + 'template', or 'phases'")
            return (PhaseSpec(name=DEFAULT_PHASE),), flat
        for key in ("jobs", "grid", "template"):
            if top.get(key) is not None:
                ctx.fail(f"top-level '{key}' cannot be combined with 'phases'; move it into a "
                         "phase", (key,))
        raw_phases = ctx.list_of(top["phases"], ("phases",))
        if not raw_phases:
            ctx.fail("the phase list is empty", ("phases",))
        phases: list[PhaseSpec] = []
        jobs: list[JobSpec] = []
        names: dict[str, int] = {}
        counts: dict[str, int] = {}
        for i, raw in enumerate(raw_phases):
            path: Path_ = ("phases", i)
            phase = ctx.mapping(raw, path)
            ctx.check_keys(phase, schema.PHASE_KEYS, path)
            if "name" not in phase:
                ctx.fail("every phase needs a 'name'", path)
            name = ctx.string(phase["name"], (*path, "name"), allow_numbers=True)
            if not ID_PATTERN.fullmatch(name):
                ctx.fail(f"phase name {name!r} may only use letters, digits, '_', '.', '-'",
                         (*path, "name"))
            if name in names:
                ctx.fail(f"phase {name!r} is defined twice (also phases[{names[name]}])",
                         (*path, "name"))
            names[name] = i
            depends = phase.get("depends_on") or []
            if isinstance(depends, str):
                depends = [depends]
            depends = [ctx.string(d, (*path, "depends_on", j), allow_numbers=True)
                       for j, d in enumerate(ctx.list_of(depends, (*path, "depends_on")))]
            policy = ctx.choice(phase.get("on_dependency_failure", "block"), ("block", "run"),
                                (*path, "on_dependency_failure"))
            phases.append(PhaseSpec(name=name, depends_on=tuple(depends),
                                    on_dependency_failure=policy))  # type: ignore[arg-type]
            scope = self._scope(phase, path, top_scope)
            phase_jobs = self._scope_jobs(phase, path, scope, name)
            counts[name] = len(phase_jobs)
            jobs.extend(phase_jobs)
        for i, phase_spec in enumerate(phases):
            for j, dep in enumerate(phase_spec.depends_on):
                dep_path: Path_ = ("phases", i, "depends_on", j) if isinstance(
                    top["phases"][i].get("depends_on"), list) else ("phases", i, "depends_on")
                if dep not in names:
                    close = difflib.get_close_matches(dep, list(names), n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else ""
                    ctx.fail(f"depends on unknown phase {dep!r}{hint}", dep_path)
                if counts[dep] == 0:
                    ctx.fail(f"depends on phase {dep!r}, which has no jobs", dep_path)
        for i, phase_spec in enumerate(phases):
            if counts[phase_spec.name] == 0:
                ctx.fail(f"phase {phase_spec.name!r} has no jobs", ("phases", i))
        self._check_cycles(phases)
        return tuple(phases), jobs

    def _check_cycles(self, phases: list[PhaseSpec]) -> None:
        graph = {p.name: p.depends_on for p in phases}
        index = {p.name: i for i, p in enumerate(phases)}
        state: dict[str, int] = {}

        def visit(name: str, trail: list[str]) -> None:
            state[name] = 1
            for dep in graph[name]:
                if state.get(dep) == 1:
                    cycle = [*trail[trail.index(dep):], dep] if dep in trail else [name, dep]
                    self.ctx.fail("dependency cycle: " + " → ".join(cycle),
                                  ("phases", index[name], "depends_on"))
                if state.get(dep) is None:
                    visit(dep, [*trail, dep])
            state[name] = 2

        for phase in phases:
            if state.get(phase.name) is None:
                visit(phase.name, [phase.name])

    def _check_gpus_fit(self, jobs: list[JobSpec], hosts: tuple[HostSpec, ...]) -> None:
        sizes = []
        for host in hosts:
            if host.gpus is not None:
                sizes.append(len(host.gpus))
            elif host.simulate is not None:
                sizes.append(host.simulate.gpus)
            else:
                return  # "all" GPUs of a real host: unknown until it is probed
        biggest = max(sizes, default=0)
        for job in jobs:
            if job.gpus_per_job > biggest:
                self.ctx.fail(f"job {job.id!r} needs {job.gpus_per_job} GPUs but no host has "
                              f"more than {biggest}", self.origins.get(job.id, ()))
