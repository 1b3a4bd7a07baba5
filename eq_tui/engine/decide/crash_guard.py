"""The crash guard: when a phase's command is broken (a typo, a script that raises at once),
stop launching that phase and wait for a person instead of burning through the whole sweep.

Evidence of a broken command is a failure before the job made any progress (no progress line,
no epoch or step, no training metric in its log: `progress_line.shows_training`) within
`within` seconds of its start, with the same failure class and the same last log line (numbers
ignored), `after` times in a row, spanning at least two configurations (grid points minus the
`group_over` key) unless the phase has only one. A job that trained and then failed (a NaN loss,
a diverging run, an assertion at the end) is a result of its configuration: it never counts,
and neither do the seeds of one configuration among many. OOMs, a full disk, lost sessions and
kills are not counted either (they have their own rules).

A healthy sweep pays nothing: until a phase has a crash of that kind the guard sets no limit,
so its launches are exactly those of `crash_guard: false`. Once it has one, the phase launches
no more than the evidence still needed, counting the attempts already out that have shown no
progress yet; so a broken command costs at most the wave launched before its first crash was
seen. Progress or a completion in the phase ends the suspicion."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from eq_tui.api.events import PhaseHeld, PhaseReleased
from eq_tui.api.held import held_phase_todo
from eq_tui.api.model import Attempt, FailureClass, JobState, JobStatus
from eq_tui.api.progress_line import shows_training
from eq_tui.engine.decide.scheduler import PhaseLimit
from eq_tui.engine.state.bus import Bus
from eq_tui.manifest.model import CrashGuard as CrashGuardSpec
from eq_tui.results.group import configuration

# failures with a rule of their own (an OOM retry, a full disk stops its host) or not the
# command's doing
NOT_COUNTED = frozenset({FailureClass.CUDA_OOM, FailureClass.HOST_OOM, FailureClass.DISK_FULL,
                         FailureClass.LOST, FailureClass.KILLED, FailureClass.REQUEUED,
                         FailureClass.LAUNCH_FAILED, FailureClass.DEPENDENCY})
_NUMBERS = re.compile(r"\d+")
Config = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class _Crash:
    job: str
    cls: str
    line: str  # the last log line, numbers blanked (pids, line numbers and times differ)
    config: Config


@dataclass
class _Phase:
    streak: list[_Crash] = field(default_factory=list)

    def configs(self) -> set[Config]:
        return {c.config for c in self.streak}


def _signature(line: str) -> str:
    return _NUMBERS.sub("#", line.strip())


def _began(attempt: Attempt) -> float | None:
    return attempt.start if attempt.start is not None else attempt.decided_at


class CrashGuard:
    def __init__(self, spec: CrashGuardSpec, project: str, bus: Bus,
                 clock: Callable[[], float],
                 group_over: Callable[[str], str] = lambda phase: "seed",
                 phase_jobs: Callable[[str], Iterable[JobState]] = lambda phase: (),
                 run_dir: str = "RUN_DIR") -> None:
        self.spec = spec
        self.run_dir = run_dir  # as the commands a person runs name it
        self.project = project
        self.bus = bus
        self.clock = clock
        self.group_over = group_over  # phase -> the grid key its seeds differ in
        self.phase_jobs = phase_jobs  # phase -> its jobs (how many configurations it has)
        self.held: dict[str, str] = {}  # phase -> why it is held
        self._phases: dict[str, _Phase] = {}
        self._progressed: dict[str, int] = {}  # job -> its attempt that showed training

    def _phase(self, name: str) -> _Phase:
        return self._phases.setdefault(name, _Phase())

    def _config(self, job: JobState) -> Config:
        return tuple(sorted(configuration(job.params, job.id, self.group_over(job.phase))
                            .items()))

    def _progressed_now(self, job: JobState) -> bool:
        current = job.current
        return current is not None and self._progressed.get(job.id) == current.n

    # ---- what the reconciler reports -------------------------------------------------------

    def saw_output(self, job: JobState, lines: Iterable[str]) -> None:
        """Lines of the running (or just ended) attempt of `job`: the first that shows training
        marks the attempt as having made progress, and clears its phase's suspicion."""
        current = job.current
        if not self.spec.enabled or current is None or self._progressed_now(job):
            return
        if any(shows_training(line) for line in lines):
            self._progressed[job.id] = current.n
            phase = self._phases.get(job.phase)
            if phase is not None and job.phase not in self.held:
                phase.streak.clear()

    def judged(self, job: JobState, status: JobStatus, failure_class: str | None) -> None:
        """An attempt of `job` ended and was judged `status` (with `failure_class`)."""
        attempt = job.current
        if not self.spec.enabled or attempt is None:
            return
        progressed = self._progressed.pop(job.id, None) == attempt.n
        phase = self._phase(job.phase)
        if status == JobStatus.COMPLETED:
            phase.streak.clear()
            return
        if failure_class is None or failure_class in NOT_COUNTED:
            return
        began = _began(attempt)
        end = attempt.end if attempt.end is not None else self.clock()
        if progressed or began is None or end - began > self.spec.within:
            phase.streak.clear()  # it trained or ran a while: the command itself works
            return
        crash = _Crash(job.id, failure_class, _signature(job.last_line), self._config(job))
        last = phase.streak[-1] if phase.streak else None
        if last is not None and (last.cls, last.line) != (crash.cls, crash.line):
            phase.streak.clear()
        if all(c.job != crash.job for c in phase.streak):
            phase.streak.append(crash)
        if self._needed(job.phase, phase) == 0 and job.phase not in self.held:
            self._hold(job.phase, phase.streak, job.last_line)

    def _needed(self, name: str, phase: _Phase) -> int:
        """How many more alike crashes would hold the phase (0: enough evidence now)."""
        more = max(0, self.spec.after - len(phase.streak))
        if more == 0 and len(phase.configs()) < 2 and self._configurations(name) > 1:
            return 1  # the seeds of one configuration: a result of that configuration
        return more

    def _configurations(self, name: str) -> int:
        return len({self._config(job) for job in self.phase_jobs(name)})

    def _hold(self, name: str, streak: list[_Crash], line: str) -> None:
        jobs = tuple(c.job for c in streak)
        shown = line.strip()[:200] or "(no output)"
        reason = (f"crash guard: {len(jobs)} jobs of phase {name} ({', '.join(jobs)}) failed "
                  f"the same way within {self.spec.within:g}s of starting, before any "
                  f"progress [{streak[-1].cls}] {shown}")
        self.held[name] = reason
        todo = held_phase_todo(self.run_dir, name, jobs[-1])
        self.bus.publish(PhaseHeld(project=self.project, at=self.clock(), phase=name,
                                   jobs=jobs, failure_class=streak[-1].cls, line=shown,
                                   reason=reason, todo=todo))
        self.bus.alert("error", f"{reason}. Launching phase {name} is held; {todo}",
                       job=jobs[-1])

    # ---- what a person does ----------------------------------------------------------------

    def release(self, phase: str, by: str) -> bool:
        if phase not in self.held:
            return False
        del self.held[phase]
        self._phase(phase).streak.clear()
        self.bus.publish(PhaseReleased(project=self.project, at=self.clock(), phase=phase,
                                       by=by))
        self.bus.alert("info", f"phase {phase} released ({by}); launching again")
        return True

    def release_all(self, by: str) -> None:
        for phase in list(self.held):
            self.release(phase, by)

    # ---- what the scheduler reads ----------------------------------------------------------

    def limits(self, jobs: Iterable[JobState], now: float) -> dict[str, PhaseLimit]:
        """How many more launches each phase may have now (phases not named: no limit)."""
        if not self.spec.enabled:
            return {}
        limits = {name: PhaseLimit(0, why) for name, why in self.held.items()}
        suspect = {name: phase for name, phase in self._phases.items()
                   if phase.streak and name not in self.held}
        if not suspect:
            return limits  # the healthy path: no limit at all
        unproven: dict[str, int] = {}  # attempts out that may yet crash the same way
        for job in jobs:
            current = job.current
            if (job.phase not in suspect or not job.status.is_active or current is None
                    or self._progressed_now(job)):
                continue
            began = _began(current)
            if began is None or now - began <= self.spec.within:
                unproven[job.phase] = unproven.get(job.phase, 0) + 1
        for name, phase in suspect.items():
            left = max(0, self._needed(name, phase) - unproven.get(name, 0))
            limits[name] = PhaseLimit(left, (
                f"crash guard: {len(phase.streak)} job(s) of phase {name} failed before any "
                "progress; waiting for the jobs out to show progress or fail the same way"))
        return limits

    # ---- the state file --------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"held": dict(self.held)}

    def restore(self, saved: dict[str, Any] | None) -> None:
        if not saved:
            return
        self.held = {str(k): str(v) for k, v in (saved.get("held") or {}).items()}
