"""Judging running jobs against what this tick's probes saw: the side-effecting counterpart of
the pure judge.py (it records exits, applies verdicts, cleans stale sessions)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from eq_tui.api.model import FailureClass, JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.decide.scheduler import phase_gates
from eq_tui.engine.tick.judge import (
    LAUNCH_GRACE_S,
    Exited,
    Lost,
    NeverStarted,
    Running,
    Verdict,
    observe,
    verdict_for_exit,
    verdict_for_lost,
)
from eq_tui.engine.tick.progress import ProgressKeeper
from eq_tui.engine.tick.resume import fallback
from eq_tui.engine.tick.stops import BackgroundStops
from eq_tui.errors import HostError
from eq_tui.hosts.base import AttemptProbe, ProbeRequest
from eq_tui.hosts.logclean import clean_text

MAX_LAUNCH_FAILURES = 3


class Reconciler:
    def __init__(self, ctx: RunContext,
                 on_gpu_fault: Callable[[JobState], None] | None = None,
                 stops: BackgroundStops | None = None) -> None:
        self.ctx = ctx
        self.stops = stops  # an attempt being stopped (a preemption, a drain) is theirs
        self.on_gpu_fault = on_gpu_fault
        self.progress = ProgressKeeper()  # each running job's whole-job progress

    async def judge(self, probed: set[str], requests: dict[str, ProbeRequest],
                    starting: frozenset[str]) -> None:
        """Judge the active jobs of the hosts probed this tick. `starting`: sessions whose
        launch had not returned when these probes were asked."""
        ctx = self.ctx
        now = ctx.clock()
        stale: list[tuple[JobState, Exited, AttemptProbe | None]] = []
        # only the probed hosts' attempts: another host's last snapshot was judged already
        attempts = ctx.ledger.attempts_by_host()
        asked = {(host, ref.key, ref.session) for host, request in requests.items()
                 for ref in request.attempts}
        for job in [ctx.ledger.jobs[ref.key] for host in ctx.hosts if host in probed
                    for ref in attempts.get(host, ()) if ref.key in ctx.ledger.jobs]:
            current = job.current
            if not job.status.is_active or job.host is None or current is None:
                continue
            if (job.host, job.id, current.session) not in asked:
                continue  # launched (or relaunched) after this probe asked: the next one judges
            snap = ctx.hosts[job.host].snapshot
            if snap is None or not snap.ok:
                continue  # host down: the job lives on in its session; judge it when back
            probe = snap.attempts.get(job.id)
            seen = observe(job, probe, now=now, stale_grace_s=ctx.manifest.stale_grace_s)
            if self.stops is not None and self.stops.judged(job, seen, probe):
                continue
            if probe is not None and probe.last_line and probe.last_line != job.last_line:
                ctx.ledger.update(job, last_line=probe.last_line)
                ctx.ledger.changed(job)
                ctx.crash_guard.saw_output(job, (probe.last_line,))
            if probe is not None and self.progress.saw(job, probe, snap.taken_at):
                ctx.ledger.changed(job)
            if probe is not None and (probe.detail or None) != job.reason and not (
                    job.reason or "").startswith("launch"):
                ctx.ledger.update(job, reason=probe.detail or None)
                ctx.ledger.changed(job)
            if current.session in starting and isinstance(seen, NeverStarted | Lost):
                continue  # this probe may have looked before the session was there
            if isinstance(seen, Running):
                self._note_running(job, seen, probe.started if probe else None)
            elif isinstance(seen, NeverStarted):
                if now - (current.decided_at or 0.0) >= LAUNCH_GRACE_S:
                    self.never_started(job, "the session never started")
            elif isinstance(seen, Lost):
                ctx.ledger.end_attempt(current, now, host_clock=False)  # no record to say
                spec = ctx.ledger.specs.get(job.id)
                self.apply_verdict(job, verdict_for_lost(job, spec.retry_lost if spec else 1))
            elif isinstance(seen, Exited):
                if seen.stale:
                    stale.append((job, seen, probe))
                else:
                    self._judge_exit(job, seen, probe)
        if stale:
            await asyncio.gather(*(self._clean_stale(job, seen, probe)
                                   for job, seen, probe in stale))

    def _note_running(self, job: JobState, seen: Running, started: float | None) -> None:
        ledger = self.ctx.ledger
        current = job.current
        changed = ledger.update(job, exited_seen_at=seen.exited_seen_at)
        if current is not None and started is not None:
            changed = ledger.update_attempt(current, start=started) or changed
        if job.status == JobStatus.LAUNCHING:
            self.ctx.ledger.set_status(job, JobStatus.RUNNING)
        elif changed:
            self.ctx.ledger.changed(job)

    def never_started(self, job: JobState, why: str) -> None:
        ledger = self.ctx.ledger
        current = job.current
        if current is not None:
            ledger.update_attempt(current, launched=False,
                                  failure_class=FailureClass.LAUNCH_FAILED)
        failures = sum(1 for a in job.history if not a.launched)
        ledger.uncount_attempt(job)
        if failures >= MAX_LAUNCH_FAILURES:
            ledger.update(job, reason=why)
            self.ctx.ledger.set_status(job, JobStatus.STUCK,
                                       failure_class=FailureClass.LAUNCH_FAILED,
                                       detail=f"{why} ({failures} tries)")
        else:
            ledger.update(job, reason=f"launch failed: {why}; trying again")
            self.ctx.ledger.set_status(job, JobStatus.PENDING)

    async def _clean_stale(self, job: JobState, seen: Exited,
                           probe: AttemptProbe | None) -> None:
        current = job.current
        assert current is not None and job.host is not None
        try:
            await self.ctx.hosts[job.host].host.kill(current.session, current.attempt_dir,
                                                     self.ctx.manifest.launcher)
        except HostError as exc:
            self.ctx.bus.alert("warning", f"{job.id}: could not clean its stale session: {exc}",
                               host=job.host, job=job.id)
            return
        self.ctx.bus.alert("info", f"{job.id}: stale session {current.session} cleaned "
                           f"(process exited {seen.exit_code})", host=job.host, job=job.id)
        self._judge_exit(job, seen, probe)

    def _judge_exit(self, job: JobState, seen: Exited, probe: AttemptProbe | None) -> None:
        ledger = self.ctx.ledger
        current = job.current
        assert current is not None
        now = self.ctx.clock()
        # the host's clock for both ends: an attempt that exited at once is judged here, on
        # the first probe that saw it, never seen running
        if probe is not None and probe.started is not None:
            ledger.update_attempt(current, start=probe.started)
        spec = self.ctx.ledger.specs.get(job.id)
        verdict = verdict_for_exit(job, seen, self.ctx.manifest, now=now,
                                   has_output_check=bool(spec and spec.output_check),
                                   output_where=self._output_where(job),
                                   gpu_totals={name: record.allowed_totals()
                                               for name, record in self.ctx.hosts.items()})
        verdict = fallback(job, current, verdict)
        if verdict.failure_class == FailureClass.RESUME_FAILED and current.resumed_from:
            ledger.update(job, failed_checkpoints=[*job.failed_checkpoints,
                                                   current.resumed_from])
            self.ctx.bus.alert("warning", f"{job.id}: {verdict.detail}", host=job.host,
                               job=job.id)
        ledger.update_attempt(current, exit_code=seen.exit_code)
        recorded = probe.exited_at if probe is not None else None
        ledger.end_attempt(current, recorded if recorded else now, host_clock=bool(recorded))
        ledger.update(job, exited_seen_at=None)
        final = [line for line in clean_text(seen.log_tail) if line.strip()]
        if final:
            ledger.update(job, last_line=final[-1][:300])
        self.ctx.crash_guard.saw_output(job, final)
        self.apply_verdict(job, verdict)

    def _output_where(self, job: JobState) -> str:
        """`glob` and the directory a relative glob was resolved in (the job's cwd there)."""
        spec = self.ctx.ledger.specs.get(job.id)
        pattern = self.ctx.output_pattern(spec) if spec else None
        if not pattern:
            return ""
        if pattern.startswith(("/", "~")) or job.host is None:
            return f"`{pattern}`"
        cwd = self.ctx.cwd_for(job.host) or f"the home directory on {job.host}"
        return f"`{pattern}` (in {cwd})"

    def apply_verdict(self, job: JobState, verdict: Verdict) -> None:
        ctx = self.ctx
        ledger = ctx.ledger
        current = job.current
        if current is not None:
            ledger.update_attempt(current, failure_class=verdict.failure_class)
        if verdict.failure_class is not None:
            cls = verdict.failure_class
            ledger.update(job, retries_by_class={**job.retries_by_class,
                                                 cls: job.retries_by_class.get(cls, 0) + 1})
        ledger.update(job, retry_at=verdict.retry_at, exited_seen_at=None)
        if verdict.escalate_memory:
            ledger.update(job, mem_escalation=job.mem_escalation + 1)
        if verdict.min_gpu_mib is not None:
            ledger.update(job, min_gpu_mib=verdict.min_gpu_mib)
        if verdict.quarantine_gpus and self.on_gpu_fault is not None:
            self.on_gpu_fault(job)  # counts toward quarantining its GPUs (gpu_health.py)
        if verdict.stop_host and job.host is not None:
            ctx.hosts[job.host].stopped = verdict.detail
            ctx.bus.alert("error", f"{job.host}: launching stopped ({verdict.detail}); free "
                          "space, then `resume`", host=job.host, job=job.id)
        ledger.update(job, reason=verdict.detail if verdict.status == JobStatus.STUCK else None)
        ctx.ledger.set_status(job, verdict.status, failure_class=verdict.failure_class,
                              detail=verdict.detail)
        ctx.crash_guard.judged(job, verdict.status, verdict.failure_class)

    def unblock_recovered(self) -> None:
        """A blocked job whose dependencies are no longer failed (retried) is pending again."""
        jobs = self.ctx.ledger.jobs
        if not any(job.status == JobStatus.BLOCKED for job in jobs.values()):
            return
        gates = phase_gates(self.ctx.manifest, list(jobs.values()))
        for job in jobs.values():
            gate = gates.get(job.phase)
            recovered = gate is not None and not gate.blocked_reason
            if (job.status == JobStatus.BLOCKED and recovered and job.failure
                    and job.failure.cls == FailureClass.DEPENDENCY):
                self.ctx.ledger.update(job, reason=None, failure=None)
                self.ctx.ledger.set_status(job, JobStatus.PENDING)
