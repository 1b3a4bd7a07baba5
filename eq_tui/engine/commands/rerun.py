"""Running a manifest again over a run dir whose jobs are stuck: say so, with the command that
retries them, instead of "finishing" at once with exit 1 and no word."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.preflight.command_words import jobs_text
from eq_tui.runfiles.layout import default_run_dir

if TYPE_CHECKING:
    from eq_tui.engine.engine import Engine


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
    command = f"eq-tui {shlex.quote(str(Path(manifest_source)))} --retry-stuck"
    if run_dir is not None and run_dir.resolve() != default_run_dir(manifest_source, project):
        command += f" --run-dir {shlex.quote(str(run_dir))}"
    return (f"{len(ids)} {noun} stuck from an earlier run ({jobs_text(ids)}); once the cause "
            f"is fixed, retry {them} with `r` in the UI or `{command}` (a job whose command "
            "you changed in the manifest is retried by itself)")


async def retry_stuck(engine: Engine) -> str | None:
    """`--retry-stuck`: every stuck job pending again in one go; the line that says so."""
    ids = [job.id for job in stuck_jobs(engine.jobs.values())]
    if not ids:
        return None
    result = await engine.command("retry", ids)
    done = tuple(job_id for job_id, answer in result["results"].items() if answer == "ok")
    return f"{engine.project}: retrying {len(done)} stuck job(s): {jobs_text(done)}"
