"""Hang detection: is a running job stalled, and what then.

A job is stalled when, over its window, at least two of these hold: its log has not grown,
its own processes compute under IDLE_UTIL_PCT on every GPU it holds, its progress (`epoch 3/10`,
`step 1200/5000`, tqdm's `45%|`, read by progress_line.py) has not advanced while its log grew
(a job that shows no progress never has this sign). A known hang line (an NCCL watchdog
timeout) marks it stalled at once. The window is the job's `stall_after`, else
max(DEFAULT_FLOOR_S, 3 x the longest gap between log growths seen so far). Each tick, `check`
reads this tick's probes: the facts come from the probe (log size, GPU utilisation, last log
line), the times from the engine's clock.

"Its own" utilisation: on a GPU several processes share, the card's figure is anyone's, so the
probe reads each process's own (NVML's per-process samples, `nvidia-smi pmon`) and the job's
processes (its process group or session) are summed. Where a shared GPU gives no per-process
reading, utilisation is no evidence either way: one sign of the log (silent, or no progress)
is enough then.

on_stall: `alert` marks the job and says so; `restart` and `kill` also act once it has been
stalled for another window (at once on a hang line): restart requeues it as failure class
`stalled` (its own budget, STALL_RETRIES), kill stops it for a person. The stop is marked on
the attempt (on disk) before its signal and runs beside the ticks (tick/stops.py); the verdict
is applied once the session has ended, by whichever engine sees it end.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from eq_tui.api.events import JobStalled
from eq_tui.api.model import FailureClass, JobState, JobStatus
from eq_tui.api.progress_line import progress_fraction
from eq_tui.engine.context import RunContext
from eq_tui.engine.tick.judge import Verdict
from eq_tui.engine.tick.stops import BackgroundStops, StopKind
from eq_tui.hosts.base import PERSON_STOP, AttemptProbe, HostSnapshot, Stop, Stopped
from eq_tui.present.durations import format_duration

IDLE_UTIL_PCT = 5
DEFAULT_FLOOR_S = 600.0
STALL_RETRIES = 2  # restarts after a stall before the job waits for a person
HANG_LINE = re.compile(r"Watchdog caught collective operation timeout|Timeout\(ms\)=\d+"
                       r"|NCCL watchdog", re.IGNORECASE)


@dataclass
class Track:
    """What hang detection remembers of one attempt (in memory: a restarted engine starts a
    fresh window, which can only make it slower to call a stall, never quicker)."""

    attempt: int
    size: int
    grown_at: float
    busy_at: float
    progressed_at: float
    progress: float | None = None
    longest_gap: float = 0.0
    hang_line: str = ""
    blind: bool = False  # by the last probe: a shared GPU with no per-process reading

    @property
    def signs_needed(self) -> int:
        return 1 if self.blind else 2

    def observe(self, probe: AttemptProbe, utils: list[int | None] | None, now: float) -> None:
        """`utils`: the job's own utilisation per GPU (None: unknown, never idle); None as a
        whole: no evidence (a shared GPU with no per-process reading)."""
        if probe.log_size > self.size:
            # silence counts from this look, the latest the line can have been written: never
            # a window early (a job that writes just inside its window is never called), and
            # a hang is called within its window plus two polls
            self.longest_gap = max(self.longest_gap, now - self.grown_at)
            self.grown_at = now
        self.size = max(self.size, probe.log_size)
        self.blind = utils is None
        if not utils or any(u is None or u >= IDLE_UTIL_PCT for u in utils):
            self.busy_at = now  # unknown utilisation never counts as idle
        progress = progress_fraction(probe.last_line)
        if progress is not None and (self.progress is None or progress > self.progress):
            self.progressed_at = now
            self.progress = progress
        if HANG_LINE.search(probe.last_line):
            self.hang_line = probe.last_line

    def window(self, stall_after: float | None) -> float:
        if stall_after is not None:
            return stall_after
        return max(DEFAULT_FLOOR_S, 3.0 * self.longest_gap)

    def signs(self, window: float, now: float) -> list[str]:
        signs = []
        silent = now - self.grown_at >= window
        if silent:
            signs.append("log_silent")
        if now - self.busy_at >= window:
            signs.append("gpus_idle")
        # A silent log shows no progress either: counting both would make silence alone a
        # stall (a quiet evaluation on busy GPUs). No progress is a sign of its own only for
        # a log that keeps growing.
        if not silent and self.progress is not None and now - self.progressed_at >= window:
            signs.append("no_progress")
        return signs


ApplyVerdict = Callable[[JobState, Verdict], None]


class StallWatch:
    def __init__(self, ctx: RunContext, stops: BackgroundStops,
                 apply_verdict: ApplyVerdict) -> None:
        self.ctx = ctx
        self.stops = stops
        self.apply_verdict = apply_verdict
        self.tracks: dict[str, Track] = {}
        stops.kinds[FailureClass.STALLED] = StopKind(stop=self._stop, why=self._why,
                                                    finish=self._stopped)

    async def check(self, probed: set[str]) -> None:
        """Judge the running jobs of the hosts probed this tick."""
        ctx = self.ctx
        now = ctx.clock()
        jobs = ctx.ledger.jobs
        for key in list(self.tracks):
            job = jobs.get(key)
            if job is None or job.status != JobStatus.RUNNING:
                del self.tracks[key]
                if job is not None and job.stalled_since is not None:
                    ctx.ledger.update(job, stalled_since=None, silent_since=None)
                    ctx.ledger.changed(job)
        by_host = ctx.ledger.attempts_by_host()
        for host in probed:
            snap = ctx.hosts[host].snapshot if host in ctx.hosts else None
            if snap is None or not snap.ok:
                continue
            for ref in list(by_host.get(host, ())):
                job = jobs.get(ref.key)
                if job is not None and job.status == JobStatus.RUNNING:
                    await self._check_one(job, snap, now)

    async def _check_one(self, job: JobState, snap: HostSnapshot, now: float) -> None:
        probe = snap.attempts.get(job.id)
        if probe is None or probe.exit_code is not None or not probe.pid_alive:
            return
        if job.current is not None and job.current.failure_class in self.stops.kinds:
            return  # being stopped (a stall's, a preemption's, a drain's): silent by right
        track = self._track(job, probe, now)
        track.observe(probe, own_utilisation(snap, job.gpus, probe.pgid), now)
        await self._judge(job, track, now)

    def _track(self, job: JobState, probe: AttemptProbe, now: float) -> Track:
        track = self.tracks.get(job.id)
        if track is None or track.attempt != job.attempts:
            # a job already stalled before an engine restart keeps its silence
            stalled = job.stalled_since
            track = Track(attempt=job.attempts, size=probe.log_size,
                          grown_at=(job.silent_since or now) if stalled else now,
                          busy_at=stalled or now, progressed_at=stalled or now)
            self.tracks[job.id] = track
        return track

    async def _judge(self, job: JobState, track: Track, now: float) -> None:
        spec = self.ctx.ledger.specs.get(job.id)
        stall_after = spec.stall_after if spec is not None else None
        on_stall = spec.on_stall if spec is not None else "alert"
        window = track.window(stall_after)
        if window <= 0:
            return
        signs = track.signs(window, now)
        if track.hang_line:
            signs.append("hang_line")
        stalled = bool(track.hang_line) or len(signs) >= track.signs_needed
        if not stalled:
            if job.stalled_since is not None:
                self._recovered(job, track, now)
            return
        if job.stalled_since is None:
            self.ctx.ledger.update(job, stalled_since=now, silent_since=track.grown_at)
            self.ctx.ledger.changed(job)
            self._publish(job, track, signs, "alert", now)
        stalled_since = job.stalled_since
        acting = on_stall in ("restart", "kill") and stalled_since is not None and (
            bool(track.hang_line) or now - stalled_since >= window)
        if acting:
            self._act(job, track, signs, on_stall, now)

    def _recovered(self, job: JobState, track: Track, now: float) -> None:
        self.ctx.ledger.update(job, stalled_since=None, silent_since=None)
        self.ctx.ledger.changed(job)
        self._publish(job, track, [], "recovered", now)

    def _act(self, job: JobState, track: Track, signs: list[str], action: str,
             now: float) -> None:
        """Mark the attempt and stop it beside the ticks; `_stopped` gives the verdict."""
        self._publish(job, track, signs, action, now)
        del self.tracks[job.id]
        # the reason is on disk with the mark: an engine that finds the stop ended says why
        self.ctx.ledger.update(job, stalled_since=None, reason=self._detail(track, signs, now))
        self.stops.begin(job, self._stop(job), mark=FailureClass.STALLED)

    def _stop(self, _job: JobState) -> Stop:
        return PERSON_STOP  # a hung job saves nothing: no checkpoint grace to wait out

    def _why(self, job: JobState) -> str:
        return job.reason or "stalled"

    def _stopped(self, job: JobState, stopped: Stopped) -> None:
        """The stalled attempt's session has ended: restart the job (its own budget), leave it
        for a person once that is spent, or kill it, as its `on_stall` says."""
        self.stops.record_end(job, stopped)
        spec = self.ctx.ledger.specs.get(job.id)
        action = spec.on_stall if spec is not None else "restart"
        detail = self._why(job)
        used = job.retries_by_class.get(FailureClass.STALLED, 0)
        if action == "restart" and used < STALL_RETRIES:
            verdict = Verdict(JobStatus.PENDING, FailureClass.STALLED,
                              f"{detail}; restarting ({used + 1}/{STALL_RETRIES})")
        elif action == "restart":
            verdict = Verdict(JobStatus.STUCK, FailureClass.STALLED,
                              f"{detail}; stalled {used + 1} times")
        else:
            verdict = Verdict(JobStatus.KILLED, FailureClass.STALLED, f"{detail}; killed")
        self.apply_verdict(job, verdict)
        self.ctx.ledger.update(job, reason=verdict.detail)

    def _detail(self, track: Track, signs: list[str], now: float) -> str:
        if track.hang_line:
            return f"hung: {track.hang_line[:160]}"
        silent = format_duration(now - track.grown_at)
        return f"stalled: silent {silent} ({', '.join(s.replace('_', ' ') for s in signs)})"

    def _publish(self, job: JobState, track: Track, signs: list[str], action: str,
                 now: float) -> None:
        ctx = self.ctx
        detail = "recovered" if action == "recovered" else self._detail(track, signs, now)
        ctx.bus.publish(JobStalled(project=ctx.project, at=now, job=job.id, host=job.host,
                                   gpus=tuple(job.gpus), attempt=job.attempts,
                                   silent_s=round(now - track.grown_at, 3), signs=tuple(signs),
                                   action=action, detail=detail))
        level = "info" if action == "recovered" else "warning"
        ctx.bus.alert(level, f"{job.id}: {detail}" + ("" if action in ("alert", "recovered")
                                                      else f" ({action})"),
                      host=job.host, job=job.id)


def own_utilisation(snap: HostSnapshot, gpus: list[int],
                    group: int | None) -> list[int | None] | None:
    """The job's own utilisation on each of its GPUs: its processes' (process group or session
    `group`) where the probe read each process's; the card's where nothing else is on it; None
    when a GPU is shared and there is no per-process reading (no evidence)."""
    by_index = {gpu.index: gpu for gpu in snap.gpus}
    utils: list[int | None] = []
    for index in gpus:
        reading = by_index.get(index)
        here = [p for p in snap.processes
                if reading is not None and p.gpu_uuid == reading.uuid]
        mine = [p for p in here if group is not None and group in (p.pgid, p.sid)]
        if any(p.util_pct is not None for p in here):
            utils.append(sum(p.util_pct or 0 for p in mine))
        elif len(mine) < len(here):
            return None  # someone else computes here too: the card's figure is no one's
        else:
            utils.append(reading.utilization_pct if reading is not None else None)
    return utils
