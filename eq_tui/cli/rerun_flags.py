"""`--retry-stuck` and `--rerun-changed`: what `eq-tui MANIFEST` asks of the engine it has just
started, through the front-end contract (a snapshot, then commands), as a person would."""

from __future__ import annotations

from eq_tui.api.client import EngineClient, JobRecord
from eq_tui.api.commands import Edit
from eq_tui.api.model import JobStatus
from eq_tui.manifest.model import Manifest
from eq_tui.present.job_ids import jobs_text


async def retry_stuck(client: EngineClient) -> str | None:
    """Every stuck job pending again in one go; the line that says so."""
    ids = [job["id"] for job in client.snapshot()["jobs"] if job["status"] == JobStatus.STUCK]
    if not ids:
        return None
    result = await client.command("retry", ids)
    done = tuple(job_id for job_id, answer in result["results"].items() if answer == "ok")
    return f"{client.project}: retrying {len(done)} stuck job(s): {jobs_text(done)}"


def changed_since_completed(jobs: list[JobRecord], manifest: Manifest) -> dict[str, str]:
    """Completed jobs whose command the manifest has changed since they ran: job id -> the
    manifest's command. A job someone edited keeps its command (as the engine's reconcile
    keeps it: engine/commands/rerun.py says so at start)."""
    specs = manifest.job_specs
    return {job["id"]: specs[job["id"]].cmd for job in jobs
            if job["status"] == JobStatus.COMPLETED and job["id"] in specs
            and not job.get("edits") and specs[job["id"]].cmd != job["cmd"]}


async def rerun_changed(client: EngineClient, manifest: Manifest) -> str | None:
    """Each completed job whose command the manifest changed runs again with it (an edit, as a
    person's: a fresh count of attempts); the line that says so."""
    changed = changed_since_completed(client.snapshot()["jobs"], manifest)
    if not changed:
        return None
    done = []
    for job_id, cmd in changed.items():
        answer = await client.send(Edit((job_id,), cmd=cmd, by="--rerun-changed"))
        if answer["results"].get(job_id) == "ok":
            done.append(job_id)
    return (f"{client.project}: running {len(done)} completed job(s) again with the manifest's "
            f"command: {jobs_text(tuple(done))}")
