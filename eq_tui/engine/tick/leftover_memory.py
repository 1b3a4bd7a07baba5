"""Leftover memory: when an attempt ends (exit, loss, kill, stall restart), processes of that
attempt still holding memory on its GPUs (a DataLoader worker that outlived its job) are ended,
and the attempt's `cleanup` says so. Which processes are the attempt's is decided on the host
by hosts/scripts/reap.sh from their environment, process group and session — never from a
GPU index alone, so someone else's process on that GPU is never touched.

Each tick, `check` compares the active attempts with last tick's: the ones gone have ended.
An ended attempt is checked on its host's probes for LEFTOVER_WINDOW_S: every process the
probe sees on its GPUs that was not tried before goes to the host to judge and end.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from eq_tui.engine.context import RunContext
from eq_tui.errors import HostError
from eq_tui.hosts.base import HostSnapshot
from eq_tui.hosts.leftovers import Reaped, Reaper, ReapRequest

LEFTOVER_WINDOW_S = 60.0


@dataclass
class Ended:
    job: str
    attempt: int
    host: str
    gpus: tuple[int, ...]
    attempt_dir: str
    ended: float
    tried: set[int] = field(default_factory=set)
    busy: bool = False


class Leftovers:
    def __init__(self, ctx: RunContext, lock: asyncio.Lock) -> None:
        self.ctx = ctx
        self.lock = lock
        self.active: dict[str, tuple[int, str, tuple[int, ...], str]] = {}
        self.ended: dict[tuple[str, int], Ended] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.primed = False

    def _recently_ended(self, now: float) -> None:
        """After a restart: attempts that ended within the window (while no engine watched,
        or judged in this first tick) are checked too."""
        for job in self.ctx.ledger.jobs.values():
            current = job.current
            if (current is None or not current.launched or current.end is None
                    or now - current.end > LEFTOVER_WINDOW_S or job.status.is_active):
                continue
            self.ended[(job.id, current.n)] = Ended(job.id, current.n, current.host,
                                                    tuple(current.gpus), current.attempt_dir,
                                                    current.end)

    def check(self, probed: set[str]) -> None:
        """Note the attempts that ended since last tick; start cleanups where this tick's
        probes show processes on their GPUs."""
        now = self.ctx.clock()
        self._note_ended(now)
        for key, entry in list(self.ended.items()):
            if now - entry.ended > LEFTOVER_WINDOW_S:
                del self.ended[key]
                continue
            record = self.ctx.hosts.get(entry.host)
            snap = record.snapshot if record is not None else None
            if entry.busy or entry.host not in probed or snap is None or not snap.ok:
                continue
            pids = leftover_candidates(snap, entry) - entry.tried
            if not pids:
                continue
            entry.tried |= pids
            host = record.host if record is not None else None
            if isinstance(host, Reaper):
                entry.busy = True
                task = asyncio.ensure_future(self._reap(host, entry, tuple(sorted(pids))))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

    def _note_ended(self, now: float) -> None:
        jobs = self.ctx.ledger.jobs
        if not self.primed:
            self.primed = True
            self._recently_ended(now)
        active = {}
        for host, refs in self.ctx.ledger.attempts_by_host().items():
            for ref in refs:
                job = jobs.get(ref.key)
                placed = job.placed if job is not None else None
                if job is not None and placed is not None:
                    active[job.id] = (placed.n, host, tuple(placed.gpus), placed.attempt_dir)
        for job_id, (n, host, gpus, attempt_dir) in self.active.items():
            if active.get(job_id, (None,))[0] != n and gpus:
                job = jobs.get(job_id)
                attempt = next((a for a in job.history if a.n == n), None) if job else None
                if job is not None and attempt is None:
                    continue  # undone before it started (claims.undo_refused): nothing of it
                ended = attempt.end if attempt is not None and attempt.end else now
                self.ended[(job_id, n)] = Ended(job_id, n, host, gpus, attempt_dir, ended)
        self.active = active

    async def _reap(self, host: Reaper, entry: Ended, pids: tuple[int, ...]) -> None:
        ctx = self.ctx
        request = ReapRequest(attempt_dir=entry.attempt_dir, job=entry.job,
                              attempt=entry.attempt, project=ctx.project,
                              run_dir=ctx.run_dir_value(), ended=entry.ended, pids=pids)
        try:
            reaped = await host.reap(request)
        except HostError as exc:
            ctx.bus.alert("warning", f"{entry.job}: leftover processes on {entry.host} GPU "
                          f"{list(entry.gpus)} could not be checked: {exc}",
                          host=entry.host, job=entry.job)
            return
        finally:
            entry.busy = False
        if reaped:
            async with self.lock:
                self._record(entry, reaped)

    def _record(self, entry: Ended, reaped: list[Reaped]) -> None:
        ctx = self.ctx
        text = describe(reaped, entry.gpus)
        job = ctx.ledger.jobs.get(entry.job)
        attempt = next((a for a in job.history if a.n == entry.attempt), None) if job else None
        if job is not None and attempt is not None:
            ctx.ledger.update_attempt(attempt, cleanup=f"{attempt.cleanup}; {text}"
                                      if attempt.cleanup else text)
            ctx.ledger.changed(job)
        level = "warning" if any(r.action == "alive" for r in reaped) else "info"
        ctx.bus.alert(level, f"{entry.job} (attempt {entry.attempt}): {text}",
                      host=entry.host, job=entry.job)

    async def settle(self) -> None:
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)


def describe(reaped: list[Reaped], gpus: tuple[int, ...]) -> str:
    ended = [r for r in reaped if r.action != "alive"]
    alive = [r for r in reaped if r.action == "alive"]
    parts = []
    if ended:
        how = "killed" if any(r.action == "kill" for r in ended) else "terminated"
        parts.append(f"{how} {len(ended)} leftover process(es) on GPU "
                     f"{','.join(map(str, gpus))}: " + ", ".join(
                         f"{r.pid} {r.user} ({r.command[:120]})" for r in ended))
    if alive:
        parts.append("still alive after KILL: " + ", ".join(str(r.pid) for r in alive))
    return "; ".join(parts)


def leftover_candidates(snap: HostSnapshot, entry: Ended) -> set[int]:
    """Processes on the ended attempt's GPUs that may be its leftovers: not those in the process
    group or session of another attempt this probe saw (the job that took the GPU next is
    running, not left over), nor those the probe found gone (memory the driver has not freed
    yet). Asking the host about either cost a round trip per hand-over, to end nothing."""
    uuids = {gpu.uuid for gpu in snap.gpus if gpu.index in entry.gpus}
    others = {probe.pgid for key, probe in snap.attempts.items()
              if key != entry.job and probe.pgid is not None}
    return {proc.pid for proc in snap.processes
            if proc.gpu_uuid in uuids and proc.running is not False
            and proc.pgid not in others and proc.sid not in others}
