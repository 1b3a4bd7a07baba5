"""The `phases:` list and its dependency graph: unknown, empty and cyclic dependencies fail."""

from __future__ import annotations

import difflib
from dataclasses import replace
from typing import Any

from eq_tui.manifest import schema
from eq_tui.manifest.added_jobs import added_job_defaults
from eq_tui.manifest.jobs import JobMaker, Scope, parse_scope
from eq_tui.manifest.model import JobSpec, PhaseSpec, ResultsSpec
from eq_tui.manifest.results_keys import parse_results
from eq_tui.manifest.schema import Context
from eq_tui.manifest.search_keys import parse_search, scope_without_search
from eq_tui.manifest.yaml_lines import Path_


def parse_phases(ctx: Context, raw: Any, maker: JobMaker, top_scope: Scope,
                 top_results: ResultsSpec) -> tuple[tuple[PhaseSpec, ...], list[JobSpec]]:
    raw_phases = ctx.list_of(raw, ("phases",))
    if not raw_phases:
        ctx.fail("the phase list is empty", ("phases",))
    phases: list[PhaseSpec] = []
    dep_paths: list[list[Path_]] = []
    jobs: list[JobSpec] = []
    counts: dict[str, int] = {}
    for i, item in enumerate(raw_phases):
        path: Path_ = ("phases", i)
        phase = ctx.mapping(item, path)
        spec, paths = _phase_spec(ctx, phase, path, top_results)
        if spec.name in counts:
            first = next(j for j, p in enumerate(phases) if p.name == spec.name)
            ctx.fail(f"phase {spec.name!r} is defined twice (also phases[{first}])",
                     (*path, "name"))
        scope = parse_scope(ctx, phase, path, top_scope)
        phase_jobs = maker.scope_jobs(scope_without_search(phase), path, scope, spec.name)
        search = parse_search(ctx, phase, path, maker, scope, spec.name, spec.results)
        phases.append(replace(spec, added_jobs=added_job_defaults(scope), search=search))
        dep_paths.append(paths)
        counts[spec.name] = len(phase_jobs) + (search is not None)
        jobs.extend(phase_jobs)
    _check_dependencies(ctx, phases, dep_paths, counts)
    _check_cycles(ctx, phases)
    return tuple(phases), jobs


def _phase_spec(ctx: Context, phase: dict[str, Any], path: Path_,
                top_results: ResultsSpec) -> tuple[PhaseSpec, list[Path_]]:
    ctx.check_keys(phase, schema.PHASE_KEYS, path)
    if "name" not in phase:
        ctx.fail("every phase needs a 'name'", path)
    name = ctx.identifier(phase["name"], (*path, "name"), "phase name")
    depends, paths = _depends_on(ctx, phase.get("depends_on"), (*path, "depends_on"))
    policy = ctx.choice(phase.get("on_dependency_failure", "block"), ("block", "run"),
                        (*path, "on_dependency_failure"))
    return PhaseSpec(name=name, depends_on=depends,
                     on_dependency_failure=policy,  # type: ignore[arg-type]
                     results=parse_results(ctx, phase, path, top_results)), paths


def _depends_on(ctx: Context, raw: Any, path: Path_) -> tuple[tuple[str, ...], list[Path_]]:
    if raw is None:
        return (), []
    if isinstance(raw, list):
        items = [(item, (*path, j)) for j, item in enumerate(raw)]
    elif isinstance(raw, (str, int)) and not isinstance(raw, bool):
        items = [(raw, path)]
    else:
        ctx.fail(f"expected a phase name or a list of them, got {schema._type_name(raw)}", path)
    names: list[str] = []
    paths: list[Path_] = []
    for item, item_path in items:
        name = ctx.string(item, item_path, allow_numbers=True)
        if name not in names:
            names.append(name)
            paths.append(item_path)
    return tuple(names), paths


def _check_dependencies(ctx: Context, phases: list[PhaseSpec], dep_paths: list[list[Path_]],
                        counts: dict[str, int]) -> None:
    for phase, paths in zip(phases, dep_paths, strict=True):
        for dep, dep_path in zip(phase.depends_on, paths, strict=True):
            if dep not in counts:
                close = difflib.get_close_matches(dep, list(counts), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else \
                    f"; phases: {', '.join(counts)}"
                ctx.fail(f"depends on unknown phase {dep!r}{hint}", dep_path)
            if counts[dep] == 0:
                ctx.fail(f"depends on phase {dep!r}, which has no jobs", dep_path)
    for i, phase in enumerate(phases):
        if counts[phase.name] == 0:
            ctx.fail(f"phase {phase.name!r} has no jobs: give it 'jobs' or 'grid' + "
                     "'template'", ("phases", i))


def _check_cycles(ctx: Context, phases: list[PhaseSpec]) -> None:
    graph = {p.name: p.depends_on for p in phases}
    index = {p.name: i for i, p in enumerate(phases)}
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        for dep in graph[name]:
            if dep in trail:
                cycle = [*trail[trail.index(dep):], dep]
                ctx.fail("dependency cycle: " + " → ".join(cycle),
                         ("phases", index[name], "depends_on"))
            if dep not in done:
                visit(dep, [*trail, dep])
        done.add(name)

    for phase in phases:
        if phase.name not in done:
            visit(phase.name, [phase.name])
