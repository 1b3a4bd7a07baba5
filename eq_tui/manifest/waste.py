"""No silent waste: jobs of one phase that would run the very same thing are refused.

What a job runs is its command: the environment, the working directory, conda and venv are the
manifest's, the same for every job, and take no grid variable. So two jobs of one phase with
the same command text are copies, launch-time variables (`${JOB_ID}`, `${RUN_DIR}`, ...) left
in: they name where a job writes, not what it computes. Copies are meant only as seeds: jobs
whose `group_over` key (`seed` unless `results.group_over` says otherwise) has different values
may share a command (a script that seeds itself from the clock); any other copy is an error.

The usual cause is a grid variable that no command uses (`wd: [0.0, 0.1]` and no `${wd}`): that
one is named, at its key in the grid; other copies (two written jobs alike, a grid point that
repeats a written job) are named by their two jobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from eq_tui.manifest.jobs import Origin
from eq_tui.manifest.model import JobSpec, PhaseSpec
from eq_tui.manifest.schema import Context


def check_waste(ctx: Context, origins: Mapping[str, Origin], jobs: Iterable[JobSpec],
                phases: Iterable[PhaseSpec]) -> None:
    """ManifestError (exit 2) at the first phase with copies, naming why."""
    seeds = {phase.name: phase.results.group_over for phase in phases}
    by_phase: dict[str, list[JobSpec]] = {}
    for job in jobs:
        by_phase.setdefault(job.phase, []).append(job)
    for name, members in by_phase.items():
        seed = seeds.get(name, "seed")
        copies = _copies(members, seed)
        if not copies:
            continue
        _refuse_unused(ctx, origins, members, seed, len(copies))
        first, copy = copies[0]
        ctx.fail(f"jobs {first.id!r} and {copy.id!r} of phase {name} run the same command "
                 f"({_short(copy.cmd)}); {len(copies)} job(s) of the phase would be copies. "
                 f"Make each command differ, or, if repeats are meant, make them a grid "
                 f"variable {seed!r} (the phase's results.group_over)", origins[copy.id].path)


def _copies(jobs: list[JobSpec], seed: str) -> list[tuple[JobSpec, JobSpec]]:
    """(the first job, a copy of it) for each job that repeats an earlier one's command and
    seed value."""
    seen: dict[tuple[str, str | None], JobSpec] = {}
    copies = []
    for job in jobs:
        key = (job.cmd, dict(job.params).get(seed))
        if key in seen:
            copies.append((seen[key], job))
        else:
            seen[key] = job
    return copies


def _refuse_unused(ctx: Context, origins: Mapping[str, Origin], jobs: list[JobSpec], seed: str,
                   count: int) -> None:
    """Fail at the first grid variable that changes no command of its grid's jobs."""
    grids: dict[tuple[str | int, ...], list[JobSpec]] = {}
    for job in jobs:
        if job.params:
            grids.setdefault(origins[job.id].path, []).append(job)
    for path, members in grids.items():
        for name in dict(members[0].params):
            if name != seed and _unused(members, name):
                values = list(dict.fromkeys(dict(job.params)[name] for job in members))
                ctx.fail(f"grid variable {name!r} ({', '.join(values)}) is used by no command "
                         f"of its jobs: {count} of the phase's {len(jobs)} jobs would be "
                         f"copies of others. Use ${{{name}}} in the command or args, or drop "
                         f"it from the grid", (*path, name))


def _unused(jobs: list[JobSpec], name: str) -> bool:
    """Whether jobs that differ only in `name` all have one command (and some do differ)."""
    commands: dict[tuple[tuple[str, str], ...], set[str]] = {}
    for job in jobs:
        rest = tuple(item for item in job.params if item[0] != name)
        commands.setdefault(rest, set()).add(job.cmd)
    return len(commands) < len(jobs) and all(len(cmds) == 1 for cmds in commands.values())


def _short(cmd: str) -> str:
    return cmd if len(cmd) <= 80 else cmd[:77] + "..."
