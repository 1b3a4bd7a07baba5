"""The run's state on disk: queue_state.json (whole, or the changed jobs through the store's
journal), restoring it, replaying launches only the event journal knows of, and summary.md."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.replay_changes import replay_change
from eq_tui.engine.state.naming import attempt_dir, session_name
from eq_tui.engine.state.store import STATE_VERSION
from eq_tui.engine.state.summary import render_summary
from eq_tui.errors import HostError


class Persistence:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.finished = False  # the queue has finished (set by the engine)
        self._persisted_whole = False
        self._finish_persisted = False
        # what summary.md ends with (the results table), from the results part
        self.summary_tail: Callable[[], Awaitable[str]] | None = None

    # ---- writing ---------------------------------------------------------------------------

    def fields(self) -> dict[str, Any]:
        """The state file's top-level fields: all but the jobs."""
        ctx = self.ctx
        return {
            "version": STATE_VERSION,
            "project": ctx.project,
            "token": ctx.token,
            "created": ctx.created,
            "updated": ctx.clock(),
            "paused": ctx.paused,
            "quarantine": {name: sorted(r.quarantined) for name, r in ctx.hosts.items()
                           if r.quarantined},
            "quarantine_reasons": {name: {str(g): why for g, why in r.quarantine_reasons.items()}
                                   for name, r in ctx.hosts.items() if r.quarantine_reasons},
            "stopped_hosts": ctx.stopped_hosts(),
            "drained": {name: r.cordon_json() for name, r in ctx.hosts.items()
                        if r.cordon is not None},
            "retired": ctx.ledger.retired,
            "commands": ctx.commands.to_json(),
            "crash_guard": ctx.crash_guard.to_json(),
            "waiting_reason": ctx.waiting_reason,
            "early_stop_edits": ctx.early_stop_edits.to_json(),
            "search_edits": ctx.search_edits.to_json(),
        }

    def state_json(self) -> dict[str, Any]:
        jobs = self.ctx.ledger.jobs
        return {**self.fields(), "jobs": [job.to_json() for job in jobs.values()]}

    def _state_streamed(self) -> dict[str, Any]:
        """The whole state with the job records made one at a time as they are written: at
        10,000 jobs, a list of every record as dicts beside their text doubles the peak."""
        jobs = self.ctx.ledger.jobs
        return {**self.fields(), "jobs": (job.to_json() for job in jobs.values())}

    def due(self) -> bool:
        """Something to write: a change not on disk yet, or journal lines old enough that
        queue_state.json should take them in (so it stays current while nothing changes)."""
        return self.ctx.ledger.unsaved or self.ctx.run_dir.state.compaction_due()

    def persist(self, *, whole: bool = False) -> None:
        """Write the state: whole the first time and when the queue finishes; otherwise the
        top-level fields and the records of the jobs that changed (the store journals them
        when the state is large). Jobs are serialised now, not when they changed, so every
        change made since is in."""
        ledger = self.ctx.ledger
        at_finish = self.finished and not self._finish_persisted
        if whole or at_finish or not self._persisted_whole:
            self.ctx.run_dir.save_state(self._state_streamed())
            self._persisted_whole = True
        else:
            self.ctx.run_dir.save_changes(self.fields(), [
                ledger.jobs[job_id].to_json() for job_id in ledger.changed_ids
                if job_id in ledger.jobs])
        self._finish_persisted = self.finished
        ledger.changed_ids.clear()
        ledger.unsaved = False

    # ---- reading back ----------------------------------------------------------------------

    def restore(self, saved: dict[str, Any]) -> None:
        ctx = self.ctx
        ctx.token = str(saved.get("token") or ctx.token)
        ctx.created = float(saved.get("created") or ctx.created)
        ctx.paused = bool(saved.get("paused", False))
        ctx.commands.restore(saved.get("commands"))
        for name, gpus in (saved.get("quarantine") or {}).items():
            if name in ctx.hosts:
                ctx.hosts[name].quarantined = set(gpus)
        for name, reasons in (saved.get("quarantine_reasons") or {}).items():
            if name in ctx.hosts:
                ctx.hosts[name].quarantine_reasons = {int(g): str(why)
                                                      for g, why in reasons.items()}
        for name, why in (saved.get("stopped_hosts") or {}).items():
            if name in ctx.hosts:
                ctx.hosts[name].stopped = str(why)
        for name, cordon in (saved.get("drained") or {}).items():
            if name in ctx.hosts:  # a host gone from the manifest is drained no more
                ctx.hosts[name].cordon = ("all" if cordon == "all" else
                                          frozenset(int(g) for g in cordon or ()))
        ctx.crash_guard.restore(saved.get("crash_guard"))
        ctx.early_stop_edits.restore(saved.get("early_stop_edits"))
        ctx.replace_manifest(ctx.early_stop_edits.apply(ctx.manifest))
        ctx.search_edits.restore(saved.get("search_edits"))
        ctx.replace_manifest(ctx.search_edits.apply(ctx.manifest))
        ctx.ledger.restore(saved, str(ctx.run_dir.state_file))

    async def replay_launches(self, saved_at: float) -> None:
        """Launches the journal (events.jsonl) knows of but the loaded state does not — it was
        recovered from the previous copy — are restored as `launching` attempts, so the probe
        adopts or judges them and nothing is launched twice. Jobs made and edits made at run
        time after that copy are restored first (replay_changes.py)."""
        ctx = self.ctx
        for event in ctx.run_dir.read_events(since=saved_at - 1.0):
            if event.get("type") in ("job_added", "job_edited"):
                replay_change(ctx, event)
                continue
            if event.get("type") != "job_state_changed" or event.get("new") != "launching":
                continue
            job = ctx.ledger.jobs.get(str(event.get("job")))
            host = event.get("host")
            n = int(event.get("attempt") or 0)
            if job is None or host not in ctx.hosts or n <= len(job.history):
                continue
            try:
                root = await ctx.hosts[host].host.log_root(ctx.project, ctx.token)
            except HostError:
                root = None
            if root is None:
                continue
            ctx.ledger.begin_attempt(
                job, n=n, host=host, gpus=list(event.get("gpus") or []),
                session=session_name(ctx.project, ctx.token, job.id, n),
                attempt_dir=attempt_dir(root, job.id, n),
                decided_at=float(event.get("at") or 0.0), replayed=True)
            ctx.bus.alert("warning", f"{job.id}: attempt {n} on {host} was missing from the "
                          "state file; restored from the event journal", host=host, job=job.id)

    # ---- summary ---------------------------------------------------------------------------

    async def write_summary(self) -> None:
        ctx = self.ctx
        jobs = list(ctx.ledger.jobs.values())
        tails: dict[str, list[str]] = {}
        needing = [j for j in jobs if j.status in (JobStatus.STUCK, JobStatus.KILLED)
                   and j.current is not None]

        async def fetch(job: JobState) -> None:
            current = job.current
            record = ctx.hosts.get(current.host) if current else None
            if record is None or current is None:
                return
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    tails[job.id] = await record.host.tail(current.attempt_dir, 8)

        await asyncio.gather(*(fetch(job) for job in needing[:50]))
        text = render_summary(ctx.project, jobs, started=ctx.created, ended=ctx.clock(),
                              log_tails=tails)
        if self.summary_tail is not None:
            with contextlib.suppress(Exception):
                tail = await self.summary_tail()
                if tail:
                    text = f"{text}\n{tail}"
        ctx.run_dir.write_summary(text)
