"""Jobs made and commands edited while the queue ran, restored from events.jsonl when the state
file was recovered from its previous copy (which may predate them): no job made at run time is
lost, no edit undone."""

from __future__ import annotations

from typing import Any

from eq_tui.api.model import JobState
from eq_tui.engine.context import RunContext
from eq_tui.engine.state.job_specs import spec_from_json


def replay_change(ctx: RunContext, event: dict[str, Any]) -> None:
    jobs = ctx.ledger.jobs
    job_id = str(event.get("job"))
    if event.get("type") == "job_added":
        spec = event.get("spec")
        if job_id in jobs or not isinstance(spec, dict) or event.get("origin") == "reload":
            return  # a reload's jobs come back from the manifest file itself
        try:
            restored = spec_from_json(spec)
        except (KeyError, TypeError, ValueError):
            return
        jobs[job_id] = JobState(id=job_id, phase=restored.phase, cmd=restored.cmd,
                                priority=restored.priority, origin=str(event.get("origin")),
                                spec=spec, edits=[{"kind": str(event.get("origin")),
                                                   "at": event.get("at"),
                                                   "by": event.get("by", ""),
                                                   "source": event.get("source"),
                                                   "new": restored.cmd}])
        ctx.bus.alert("warning", f"{job_id}: made at run time but missing from the state "
                      "file; restored from the event journal", job=job_id)
        return
    job = jobs.get(job_id)
    new = event.get("new_cmd")
    if job is None or not isinstance(new, str) or job.cmd == new or job.status.is_active:
        return
    ledger = ctx.ledger
    ledger.update(job, edits=[*job.edits, {"kind": "edit", "at": event.get("at"),
                                           "by": event.get("by", ""), "old": job.cmd,
                                           "new": new, "requeued": False}])
    ledger.change_cmd(job, new)
    if job.spec is not None:
        ledger.update(job, spec={**job.spec, "cmd": new})
