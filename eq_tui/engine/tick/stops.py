"""Stops that run beside the ticks: a preemption's victim (tick/preempt.py) and the jobs a
`drain --now` takes off a host (commands/cordon.py) get their signal, their grace to save a
checkpoint (up to a minute, or more), then SIGKILL, and go back to pending. The grace is waited
out of the engine lock, so meanwhile other hosts' exits are judged, other jobs launched and
commands answered.

The stop is marked on the attempt before the signal goes, and the mark is on disk first: its
`failure_class` is `requeued` (and `preempted_by` names the preemptor) while the job still
runs. A marked attempt is never judged as an ordinary exit: its stop requeues it (no retry
spent), or, when the engine died during the grace and a new one finds the mark, the judge does
(`judged`): a session that ended by then is requeued from what the host recorded, one still
running is stopped again — with no second signal and only the rest of its grace, timed by
the host from the first stop's record (hosts/scripts/kill.sh). So a victim is never started
twice, never counted as failed or completed, and its preemption is counted once (the mark is
the count).

A stall's stop (tick/stall.py: `on_stall: restart | kill`) goes the same way under its own
mark, `stalled`: its verdict (restart, kill, or wait for a person after STALL_RETRIES) is
applied once the session has ended, by the stop or, when an engine died during it or its host
did not answer, by the judge: a job the engine itself stopped is never judged an ordinary
`exit_nonzero`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from eq_tui.api.model import FailureClass, JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.tick.judge import Exited, Lost, Observation, Running
from eq_tui.errors import HostError
from eq_tui.hosts.base import PERSON_STOP, AttemptProbe, Stop, Stopped

DRAIN_GRACE_S = 60.0  # a job without a checkpoint contract stopped by `drain --now`


@dataclass(frozen=True)
class StopKind:
    """What a mark (an attempt's failure class set before its signal) means: the stop to send
    again when a new engine finds the session still running, why (for the attempt's record),
    and what becomes of the job once the session has ended (under the engine lock)."""

    stop: Callable[[JobState], Stop]
    why: Callable[[JobState], str]
    finish: Callable[[JobState, Stopped], None]


class BackgroundStops:
    def __init__(self, ctx: RunContext, lock: asyncio.Lock,
                 persist: Callable[[], None]) -> None:
        self.ctx = ctx
        self._lock = lock
        self._persist = persist
        self.tasks: dict[str, asyncio.Task[None]] = {}  # job id -> its stop under way
        self.kinds: dict[str, StopKind] = {FailureClass.REQUEUED: StopKind(
            stop=self._stop_again, why=self._why, finish=self.requeue)}

    def stop_for(self, job: JobState, grace: float | None = None, *,
                 preempting: bool = False) -> Stop:
        """The job's checkpoint signal (TERM without a contract) and, unless `grace` is given,
        its contract's grace (without one: a drain's minute, a forced preemption's kill)."""
        spec = self.ctx.ledger.specs.get(job.id)
        contract = spec.checkpoint if spec is not None else None
        if contract is None:
            if grace is None:
                return PERSON_STOP if preempting else Stop(grace_s=DRAIN_GRACE_S)
            return Stop(grace_s=grace)
        return Stop(signal=contract.signal, grace_s=contract.grace if grace is None else grace)

    def begin(self, job: JobState, stop: Stop, preempted_by: str | None = None,
              mark: str = FailureClass.REQUEUED) -> asyncio.Task[None] | None:
        """Under the engine lock: mark the running attempt (on disk), then stop it in the
        background; the task, or None when nothing runs (or its stop is already under way)."""
        attempt = job.current
        if not job.status.is_active or attempt is None or job.host not in self.ctx.hosts:
            return None
        if job.id in self.tasks:
            return self.tasks[job.id]
        ledger = self.ctx.ledger
        if attempt.failure_class != mark:
            ledger.update_attempt(attempt, failure_class=mark, preempted_by=preempted_by)
            ledger.changed(job)
            self._persist()  # the mark before the signal: a restart finds it
        task = asyncio.create_task(self._stop(job, stop, self.kinds[mark]))
        self.tasks[job.id] = task
        task.add_done_callback(lambda _: self.tasks.pop(job.id, None))
        return task

    async def _stop(self, job: JobState, stop: Stop, kind: StopKind) -> None:
        attempt = job.current
        assert attempt is not None
        why = kind.why(job)
        stopped: Stopped | None = None
        try:
            stopped = await self.ctx.hosts[attempt.host].host.kill(
                attempt.session, attempt.attempt_dir, self.ctx.manifest.launcher, why, stop)
        except HostError as exc:  # the judge finishes it once the host answers again
            self.ctx.bus.alert("warning", f"{job.id}: could not stop it ({why}): {exc}",
                               host=attempt.host, job=job.id)
        async with self._lock:
            if stopped is not None and job.current is attempt and job.status.is_active:
                kind.finish(job, stopped)
                with contextlib.suppress(Exception):
                    self._persist()

    def requeue(self, job: JobState, stopped: Stopped) -> None:
        """The marked attempt has ended (`stopped`: the host's records of it): the job goes
        back to pending, its next attempt resumes from its checkpoint."""
        if not job.status.is_active or job.current is None:
            return
        ledger = self.ctx.ledger
        self.record_end(job, stopped)
        # a requeue, not a failure: that launch spent no retry of the job's budget
        ledger.update(job, retry_at=None, exited_seen_at=None, reason=self._why(job, done=True),
                      retry_base=job.retry_base + 1)
        ledger.set_status(job, JobStatus.PENDING)

    def record_end(self, job: JobState, stopped: Stopped) -> None:
        """The stopped attempt's two ends and exit code, as the host recorded them."""
        attempt = job.current
        assert attempt is not None
        ledger = self.ctx.ledger
        if stopped.started_at is not None:
            ledger.update_attempt(attempt, start=stopped.started_at)
        ended = stopped.ended_at
        ledger.end_attempt(attempt, ended if ended is not None else self.ctx.clock(),
                           host_clock=ended is not None)
        if stopped.code is not None:
            ledger.update_attempt(attempt, exit_code=stopped.code)

    def judged(self, job: JobState, seen: Observation, probe: AttemptProbe | None) -> bool:
        """The judge's part for a marked attempt (True: it is not judged otherwise): its stop
        under way finishes it; with none (an engine restarted during the grace) an ended
        session is requeued here and a running one stopped again."""
        attempt = job.current
        mark = attempt.failure_class if attempt is not None else None
        if attempt is None or mark is None or mark not in self.kinds:
            return False
        if job.id in self.tasks:
            return True
        kind = self.kinds[mark]
        if isinstance(seen, Lost) or (isinstance(seen, Exited) and not seen.stale):
            code = seen.exit_code if isinstance(seen, Exited) else None
            kind.finish(job, Stopped(code, probe.exited_at if probe else None,
                                     probe.started if probe else None))
        elif isinstance(seen, Running | Exited):  # a stale session is cleaned by the stop
            self.begin(job, kind.stop(job), attempt.preempted_by, mark=mark)
        return True

    def _stop_again(self, job: JobState) -> Stop:
        attempt = job.current
        return self.stop_for(job, preempting=attempt is not None
                             and attempt.preempted_by is not None)

    def _why(self, job: JobState, *, done: bool = False) -> str:
        attempt = job.current
        by = attempt.preempted_by if attempt is not None else None
        if by is None:
            host = attempt.host if attempt is not None else job.host
            return f"{host} drained: stopped to resume elsewhere"
        if not done:
            return f"preempted by {by}"
        spec = self.ctx.ledger.specs.get(job.id)
        count = sum(1 for a in job.history if a.preempted_by)
        most = spec.max_preemptions if spec is not None else 0
        return f"preempted by {by} ({count} of {most}); resumes from its checkpoint"

    async def settle(self) -> None:
        """Wait for the stops under way (the engine's shutdown): each job is requeued."""
        while self.tasks:
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
