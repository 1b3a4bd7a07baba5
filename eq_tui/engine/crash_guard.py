"""The crash guard: when jobs of a phase keep failing the same way right after they start (a
typo in the command, a script that raises at once), stop launching that phase and wait for a
person instead of burning through the whole sweep.

A phase is on probation until one of its attempts proves the command works (it completed, or
ran longer than `within`): while on probation at most `after` of its attempts are out at once,
so a broken command costs at most `after` launches. Any `after` exits in a row that failed with
the same class and the same last log line within `within` seconds of starting hold the phase.
OOMs, a full disk, lost sessions and kills are not counted (they have their own rules)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from eq_tui.engine.bus import Bus
from eq_tui.engine.events import PhaseHeld, PhaseReleased
from eq_tui.engine.model import Attempt, FailureClass, JobState, JobStatus
from eq_tui.engine.scheduler import PhaseLimit
from eq_tui.manifest.model import CrashGuard as CrashGuardSpec

# failures with a rule of their own (an OOM retry, a full disk stops its host) or not the
# command's doing
NOT_COUNTED = frozenset({FailureClass.CUDA_OOM, FailureClass.HOST_OOM, FailureClass.DISK_FULL,
                         FailureClass.LOST, FailureClass.KILLED, FailureClass.REQUEUED,
                         FailureClass.LAUNCH_FAILED, FailureClass.DEPENDENCY})
_NUMBERS = re.compile(r"\d+")


@dataclass(frozen=True)
class _Crash:
    job: str
    cls: str
    line: str  # the last log line, numbers blanked (pids, line numbers and times differ)


@dataclass
class _Phase:
    streak: list[_Crash] = field(default_factory=list)
    proven: bool = False


def _signature(line: str) -> str:
    return _NUMBERS.sub("#", line.strip())


def _began(attempt: Attempt) -> float | None:
    return attempt.start if attempt.start is not None else attempt.decided_at


class CrashGuard:
    def __init__(self, spec: CrashGuardSpec, project: str, bus: Bus,
                 clock: Callable[[], float]) -> None:
        self.spec = spec
        self.project = project
        self.bus = bus
        self.clock = clock
        self.held: dict[str, str] = {}  # phase -> why it is held
        self._phases: dict[str, _Phase] = {}

    def _phase(self, name: str) -> _Phase:
        return self._phases.setdefault(name, _Phase())

    # ---- what the reconciler reports -------------------------------------------------------

    def judged(self, job: JobState, status: JobStatus, failure_class: str | None) -> None:
        """An attempt of `job` ended and was judged `status` (with `failure_class`)."""
        attempt = job.current
        if not self.spec.enabled or attempt is None:
            return
        phase = self._phase(job.phase)
        if status == JobStatus.COMPLETED:
            phase.streak.clear()
            phase.proven = True
            return
        if failure_class is None or failure_class in NOT_COUNTED:
            return
        began = _began(attempt)
        end = attempt.end if attempt.end is not None else self.clock()
        if began is None or end - began > self.spec.within:
            phase.streak.clear()  # it ran a while: the command itself works
            phase.proven = True
            return
        crash = _Crash(job.id, failure_class, _signature(job.last_line))
        last = phase.streak[-1] if phase.streak else None
        if last is not None and (last.cls, last.line) != (crash.cls, crash.line):
            phase.streak.clear()
        if all(c.job != crash.job for c in phase.streak):
            phase.streak.append(crash)
        if len(phase.streak) >= self.spec.after and job.phase not in self.held:
            self._hold(job.phase, phase.streak, job.last_line)

    def _hold(self, name: str, streak: list[_Crash], line: str) -> None:
        jobs = tuple(c.job for c in streak)
        shown = line.strip()[:200] or "(no output)"
        reason = (f"crash guard: {len(jobs)} jobs of phase {name} ({', '.join(jobs)}) failed "
                  f"the same way within {self.spec.within:g}s of starting "
                  f"[{streak[-1].cls}] {shown}")
        self.held[name] = reason
        self.bus.publish(PhaseHeld(project=self.project, at=self.clock(), phase=name,
                                   jobs=jobs, failure_class=streak[-1].cls, line=shown,
                                   reason=reason))
        self.bus.alert("error", f"{reason}. Launching phase {name} is held: fix the command, "
                       "then retry one of them (r in the UI) or resume the queue",
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
        if all(p.proven for p in self._phases.values()) and self._phases and not limits:
            return limits
        active: dict[str, int] = {}
        for job in jobs:
            phase = self._phase(job.phase)
            if phase.proven or not job.status.is_active or job.current is None:
                continue
            began = _began(job.current)
            if began is not None and now - began > self.spec.within:
                phase.proven = True
                continue
            active[job.phase] = active.get(job.phase, 0) + 1
        for name, phase in self._phases.items():
            if phase.proven or name in limits:
                continue
            left = self.spec.after - len(phase.streak) - active.get(name, 0)
            limits[name] = PhaseLimit(max(0, left), (
                f"crash guard: waiting for the first jobs of phase {name} to run "
                f"{self.spec.within:g}s or complete"))
        return limits

    # ---- the state file --------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"held": dict(self.held),
                "proven": sorted(name for name, p in self._phases.items() if p.proven)}

    def restore(self, saved: dict[str, Any] | None) -> None:
        if not saved:
            return
        self.held = {str(k): str(v) for k, v in (saved.get("held") or {}).items()}
        for name in saved.get("proven") or []:
            self._phase(str(name)).proven = True
