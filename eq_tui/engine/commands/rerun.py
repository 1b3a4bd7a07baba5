"""Running a manifest again over a run dir whose jobs are stuck, or whose completed jobs ran a
command the manifest has changed since: say so, with the command that runs them again
(`--retry-stuck`, `--rerun-changed`: cli/rerun_flags.py, through the front-end contract),
instead of "finishing" at once with no word."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path

from eq_tui.api.model import JobState, JobStatus
from eq_tui.manifest.model import JobSpec, Manifest
from eq_tui.present.job_ids import jobs_text
from eq_tui.runfiles.paths import default_run_dir


def stuck_jobs(jobs: Iterable[JobState]) -> list[JobState]:
    return [job for job in jobs if job.status == JobStatus.STUCK]


def stuck_notice(manifest_source: str, jobs: Iterable[JobState], run_dir: Path | None = None,
                 project: str = "") -> str | None:
    """One line for a run that starts with stuck jobs from before, or None. `run_dir` (with
    `project`) adds `--run-dir` to the command when it is not the default one."""
    stuck = stuck_jobs(jobs)
    if not stuck:
        return None
    ids = tuple(job.id for job in stuck)
    noun = "job is" if len(ids) == 1 else "jobs are"
    them = "it" if len(ids) == 1 else "them"
    command = rerun_command(manifest_source, "--retry-stuck", run_dir, project)
    return (f"{len(ids)} {noun} stuck from an earlier run ({jobs_text(ids)}); once the cause "
            f"is fixed, retry {them} with `r` in the UI or `{command}` (a job whose command "
            "you changed in the manifest is retried by itself)")


def rerun_command(manifest_source: str, flag: str, run_dir: Path | None = None,
                  project: str = "") -> str:
    """`eq-tui MANIFEST FLAG`, with `--run-dir` when the run dir is not the default one."""
    command = f"eq-tui {shlex.quote(str(Path(manifest_source)))} {flag}"
    if run_dir is not None and run_dir.resolve() != default_run_dir(manifest_source, project):
        command += f" --run-dir {shlex.quote(str(run_dir))}"
    return command


def changed_since_completed(jobs: Iterable[JobState],
                            specs: Mapping[str, JobSpec]) -> list[JobState]:
    """Completed jobs whose command the manifest has changed since they ran (a person's own
    edit is their command: the engine's specs keep it)."""
    return [job for job in jobs if job.status == JobStatus.COMPLETED and job.id in specs
            and specs[job.id].cmd != job.cmd]


def changed_notice(manifest_source: str, changed: list[JobState], run_dir: Path | None = None,
                   project: str = "") -> str | None:
    """One line for a run whose completed jobs ran an older command than the manifest's."""
    if not changed:
        return None
    ids = tuple(job.id for job in changed)
    noun = "job ran" if len(ids) == 1 else "jobs ran"
    command = rerun_command(manifest_source, "--rerun-changed", run_dir, project)
    return (f"{len(ids)} completed {noun} a command the manifest has changed since "
            f"({jobs_text(ids)}): their results are of the old one, and a results row that "
            f"mixes both says so; `{command}` runs them again with the manifest's")


def start_notices(manifest: Manifest, jobs: Iterable[JobState], specs: Mapping[str, JobSpec],
                  run_dir: Path) -> list[str]:
    """What a run that starts over a run dir says first: stuck jobs, and completed ones whose
    command the manifest has changed, each with the command that runs them again."""
    jobs = list(jobs)
    notices = (stuck_notice(manifest.source, jobs, run_dir, manifest.project),
               changed_notice(manifest.source, changed_since_completed(jobs, specs), run_dir,
                              manifest.project))
    return [notice for notice in notices if notice]
