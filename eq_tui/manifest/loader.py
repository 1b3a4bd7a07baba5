"""Read a manifest (YAML or JSON) into a validated, expanded Manifest.

Semantics worth knowing:

- Job sources, in order, inside the top level or inside each phase: `jobs` (each with `id`,
  and `cmd` or `args` appended to `default_cmd`), then `grid` + `template` (the Cartesian
  product in key order, the last key varying fastest). A template without `id` names its
  jobs from the grid point (`N64_seed42`); a template without a grid is an error.
- With `phases`, jobs live in the phases: top-level `jobs`/`grid`/`template` are an error,
  while top-level `default_cmd`, `args`, `preconditions`, `output_check`, `gpus_per_job`,
  `mem_mib`, `exclusive` (and the other job keys) are defaults every phase inherits. Without
  `phases`, every job is in phase `main`.
- `${var}` takes the grid point, then the job's own args (args themselves see only the grid
  point). `${GPU}`, `${RUN_DIR}`, `${ATTEMPT}` and `${JOB_ID}` are left for launch time; `$$`
  writes a literal `$`. In commands a substituted value is shell-quoted when it needs it.
- Args render as `--key value` (value shell-quoted); `true` gives a bare `--key`, `false` and
  null drop it, a list gives `--key a b`. Numbers keep the text written (`0.10` stays `0.10`).
- Without `project`, the file's stem (made a valid id) names the project.
- `ssh:` (one host, named after its host part) and `hosts:` are exclusive; with neither, one
  local host named `local`. Top-level `gpus`, `max_parallel`, `max_jobs_per_gpu` and
  `max_cpu_jobs` are defaults for hosts.
- `gpus_per_job: 0` is a CPU-only job; `mem_mib` or `exclusive: true` for one is an error
  (sharing.py).
- Jobs of one phase that run the same command are an error, unless they differ in the phase's
  seed key (waste.py): an unused grid variable is named.
- Every error is a ManifestError naming the file, line and key path (exit code 2).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from eq_tui.errors import ManifestError
from eq_tui.manifest import schema
from eq_tui.manifest.added_jobs import added_job_defaults
from eq_tui.manifest.hosts import gpu_capacity, parse_hosts
from eq_tui.manifest.jobs import JobMaker, Scope, parse_scope
from eq_tui.manifest.model import (
    DEFAULT_PHASE,
    HostSpec,
    JobSpec,
    Manifest,
    PhaseSpec,
    ResultsSpec,
)
from eq_tui.manifest.phases import parse_phases
from eq_tui.manifest.results_keys import parse_results
from eq_tui.manifest.schema import Context
from eq_tui.manifest.search_keys import parse_search, scope_without_search
from eq_tui.manifest.settings import (
    parse_crash_guard,
    parse_env,
    parse_oom_retry,
    parse_project,
)
from eq_tui.manifest.sharing import for_gpus, parse_margin
from eq_tui.manifest.waste import check_waste
from eq_tui.manifest.watch_keys import parse_notify
from eq_tui.manifest.yaml_lines import load_with_lines


def load_manifest(path: str | Path) -> Manifest:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError("no such file", path=source) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: a NUL in the path
        raise ManifestError(f"cannot read the manifest: {exc}", path=source) from None
    return load_manifest_text(text, source)


def load_manifest_text(text: str, source: str = "manifest.yaml") -> Manifest:
    """Parse and expand `text`; `source` names it in errors and picks JSON by its extension."""
    try:
        located = load_with_lines(text, source)
        return _build(Context(source, located), located.data)
    except ManifestError:
        raise
    except RecursionError:
        raise ManifestError("the manifest nests too deeply", path=source) from None
    except Exception as exc:
        # A bug in the loader: still exit 2 with a message, and say it is ours.
        raise ManifestError(f"internal error while loading the manifest "
                            f"({type(exc).__name__}: {exc}); please report it",
                            path=source) from exc


def _build(ctx: Context, data: Any) -> Manifest:
    top = ctx.mapping(data, ())
    ctx.check_keys(top, schema.TOP_KEYS, ())
    project = parse_project(ctx, top)
    hosts = parse_hosts(ctx, top)
    top_scope = parse_scope(ctx, top, (), Scope())
    top_sharing = for_gpus(ctx, top_scope.sharing, top_scope.gpus_per_job,
                           top_scope.gpus_per_job_path)
    maker = JobMaker(ctx)
    results = parse_results(ctx, top, (), ResultsSpec())
    phases, jobs = _phases_and_jobs(ctx, top, maker, top_scope, results)
    check_waste(ctx, maker.origins, jobs, phases)
    _check_gpus_fit(ctx, maker, jobs, hosts)
    return Manifest(
        project=project, source=ctx.source,
        cwd=_optional_string(ctx, top, "cwd"), conda=_optional_string(ctx, top, "conda"),
        conda_hook=_optional_string(ctx, top, "conda_hook"),
        venv=_optional_string(ctx, top, "venv"),
        env=parse_env(ctx, top.get("env")), hosts=hosts,
        gpu_free_threshold_mib=ctx.integer(top.get("gpu_free_threshold_mib", 500),
                                           ("gpu_free_threshold_mib",), minimum=1),
        gpus_per_job=top_scope.gpus_per_job,
        mem_mib=top_sharing.mem_mib, exclusive=top_sharing.exclusive,
        gpu_margin_mib=parse_margin(ctx, top),
        launcher=ctx.choice(top.get("launcher", "screen"), ("screen", "tmux"),
                            ("launcher",)),  # type: ignore[arg-type]
        waves=ctx.choice(top.get("waves", "rolling"), ("rolling", "strict"),
                         ("waves",)),  # type: ignore[arg-type]
        oom_retry=parse_oom_retry(ctx, top.get("oom_retry")),
        poll=ctx.number(top["poll"], ("poll",), strictly_positive=True)
        if top.get("poll") is not None else None,
        stale_grace_s=ctx.number(top.get("stale_grace_s", 5.0), ("stale_grace_s",), minimum=0),
        retry_delay_s=ctx.number(top.get("retry_delay_s", 30.0), ("retry_delay_s",),
                                 minimum=0),
        crash_guard=parse_crash_guard(ctx, top.get("crash_guard")),
        phases=phases, jobs=tuple(jobs), results=results,
        notify=parse_notify(ctx, top.get("notify")))


def _optional_string(ctx: Context, top: dict[str, Any], key: str) -> str | None:
    if top.get(key) is None:
        return None
    return ctx.string(top[key], (key,), allow_numbers=True)


def _phases_and_jobs(ctx: Context, top: dict[str, Any], maker: JobMaker, top_scope: Scope,
                     results: ResultsSpec) -> tuple[tuple[PhaseSpec, ...], list[JobSpec]]:
    if top.get("phases") is None:
        jobs = maker.scope_jobs(scope_without_search(top), (), top_scope, DEFAULT_PHASE)
        search = parse_search(ctx, top, (), maker, top_scope, DEFAULT_PHASE, results)
        if not jobs and search is None:
            ctx.fail("no jobs: give 'jobs', 'grid' + 'template', 'search', or 'phases'")
        # the top level's on_complete runs once, when the queue is done
        return (PhaseSpec(name=DEFAULT_PHASE, results=replace(results, on_complete=None),
                          added_jobs=added_job_defaults(top_scope), search=search),), jobs
    for key in ("jobs", "grid", "template", "search"):
        if top.get(key) is not None:
            ctx.fail(f"top-level '{key}' cannot be combined with 'phases'; move it into a "
                     "phase", (key,))
    return parse_phases(ctx, top["phases"], maker, top_scope, results)


def _check_gpus_fit(ctx: Context, maker: JobMaker, jobs: list[JobSpec],
                    hosts: tuple[HostSpec, ...]) -> None:
    sizes = [gpu_capacity(host) for host in hosts]
    if any(size is None for size in sizes):
        return  # "all" GPUs of a real host: unknown until it is probed
    biggest = max(size for size in sizes if size is not None)
    for job in jobs:
        if job.gpus_per_job > biggest:
            origin = maker.origins[job.id]
            ctx.fail(f"job {job.id!r} ({origin.text}) needs {job.gpus_per_job} GPUs but no "
                     f"host has more than {biggest}", origin.path)
