"""Preemption by priority, acted on (the rule: decide/preemption.py). After each decision, a
waiting job with `preempt` that decide() could not place may stop one running job of lower
priority: the victim gets its checkpoint's signal, its grace, then SIGKILL (the stop a drain
--now gives, run beside the ticks: tick/stops.py), and goes back to pending with no retry
spent; its next attempt resumes from its newest checkpoint (tick/resume.py). While the victim
stops, the GPUs it frees are hidden from placement (`views`), so no other job takes them; once
it has stopped, the preemptor, of higher priority than anything the victim's stop let in, is
placed first.

A preemption is counted in the victim's history (`preempted_by` on the stopped attempt, set
and written to disk before the signal goes), so an engine restarted keeps the counts; a victim
whose stop was under way when the engine stopped is finished by the next one (stops.py) and is
never chosen again meanwhile."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from eq_tui.api.events import JobPreempted
from eq_tui.api.model import ACTIVE, WAITING, FailureClass, JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.decide.placement import HostView
from eq_tui.engine.decide.preemption import (
    Gpu,
    Limits,
    Preemption,
    Running,
    Waiting,
    choose,
    settled,
)
from eq_tui.engine.decide.scheduler import Decision, decide
from eq_tui.engine.tick.memory import MemoryBook
from eq_tui.engine.tick.observation import Observation
from eq_tui.engine.tick.stops import BackgroundStops
from eq_tui.manifest.model import JobSpec

# what keeps a job waiting that no GPU freed would cure (scheduler.py, waiting.py)
NOT_ROOM = ("waits for phase", "retry at", "precondition not met", "checking preconditions",
            "no longer defined", "waits for its", "crash guard", "secret ")


def preemptions(job: JobState) -> int:
    return sum(1 for attempt in job.history if attempt.preempted_by)


class Preempter:
    def __init__(self, ctx: RunContext, stops: BackgroundStops,
                 observation: Observation) -> None:
        self.ctx = ctx
        self.stops = stops
        self.memory: MemoryBook | None = observation.memory
        self.flights: list[Preemption] = []
        self._adopted = False  # the flights of an engine before this one, taken over once
        self._views: Sequence[HostView] = ()
        self._preconditions: dict[str, bool] = {}
        self.observation = observation
        observation.hide = self.views

    def views(self, views: list[HostView]) -> list[HostView]:
        """The host views placement gets: the GPUs of a victim still stopping left out."""
        self._views = views
        if not self._adopted:
            self._adopt()
        # this tick's precondition answers: decide() reads them (and they are cleared after),
        # yet with every GPU taken it reaches no job, so a preemptor's are read here
        self._preconditions = dict(self.observation.precondition_results)
        kept: dict[str, set[int]] = {}
        for flight in self.flights:
            kept.setdefault(flight.host, set()).update(flight.gpus)
        return [view if view.name not in kept else _only(view, _allowed(view) - kept[view.name])
                for view in views]

    def _adopt(self) -> None:
        """An engine restarted during a preemption (or before its preemptor started): the
        flight again, from the victim's attempt (written before the signal: tick/stops.py),
        so its GPUs stay kept for the preemptor."""
        self._adopted = True
        jobs, specs = self.ctx.ledger.jobs, self.ctx.ledger.specs
        for victim in jobs.values():
            attempt = victim.current
            by = attempt.preempted_by if attempt is not None else None
            preemptor, spec = (jobs.get(by), specs.get(by)) if by else (None, None)
            if (attempt is None or by is None or preemptor is None or spec is None
                    or victim.status.is_finished or preemptor.status not in WAITING
                    or not 0 < spec.gpus_per_job <= len(attempt.gpus)
                    or any(flight.preemptor == by for flight in self.flights)):
                continue
            gpus = tuple(sorted(attempt.gpus)[:spec.gpus_per_job])
            self.flights.append(Preemption(by, victim.id, attempt.host, gpus))

    def _launch_preemptors(self, decision: Decision) -> None:
        """A preemptor whose victim has stopped is placed on the GPUs kept for it alone (its
        preconditions held when it chose: they are not asked again)."""
        if not self.flights:
            return
        jobs = self.ctx.ledger.jobs
        launched = {launch.job_id for launch in decision.launches}
        active = [job for job in jobs.values() if job.status in ACTIVE]
        for flight in self.flights:
            victim, job = jobs.get(flight.victim), jobs.get(flight.preemptor)
            if (job is None or job.status not in WAITING or job.id in launched
                    or (victim is not None and victim.status in ACTIVE)
                    or any(x.host == flight.host and set(x.gpus) & set(flight.gpus)
                           for x in decision.launches)):
                continue
            views = [_only(view, frozenset(flight.gpus) & _allowed(view))
                     for view in self._views if view.name == flight.host]
            got = decide(self.ctx.manifest, [*active, job], views, now=self.ctx.clock(),
                         paused=False, preconditions={job.id: True},
                         specs=self.ctx.ledger.specs,
                         memory=self.memory.plan() if self.memory is not None else None)
            decision.launches.extend(got.launches)

    def check(self, decision: Decision) -> None:
        """After decide(): the preemptions under way kept or let go, new ones begun."""
        ledger = self.ctx.ledger
        jobs = ledger.jobs
        if self.flights:  # a run that never preempts pays for none of this
            self.flights = settled(self.flights,
                                   [j for j, job in jobs.items() if job.status in ACTIVE],
                                   [j for j, job in jobs.items() if job.status in WAITING])
        for flight in self.flights:
            preemptor = jobs.get(flight.preemptor)
            if preemptor is not None and preemptor.status in WAITING and \
                    ledger.update(preemptor, reason=flight.reason()):
                ledger.changed(preemptor)
        if self.ctx.paused or self.ctx.awaiting_command() or decision.context.overall:
            return
        self._launch_preemptors(decision)
        launched = {launch.job_id for launch in decision.launches}
        for job_id, spec in ledger.specs.items():
            job = jobs.get(job_id)
            if (not spec.preempt or job is None or job.status != JobStatus.PENDING
                    or job_id in launched or spec.gpus_per_job == 0
                    or any(f.preemptor == job_id for f in self.flights)):
                continue
            why = decision.why_waiting(job) or ""
            if not why or why.startswith(NOT_ROOM) or job.phase in decision.context.phases:
                continue
            if spec.preconditions and not self._preconditions.get(job_id):
                self.observation.want_preconditions.add(job_id)  # asked of the next probe
                continue
            self._consider(job, spec, why)

    def _consider(self, job: JobState, spec: JobSpec, why: str) -> None:
        ledger = self.ctx.ledger
        plan = self.memory.plan() if self.memory is not None else None
        need = plan.need(job, spec).mib if plan is not None else None
        waiting = Waiting(job.id, job.priority, spec.preempt, spec.gpus_per_job, need)
        manifest = self.ctx.manifest
        limits = Limits(manifest.gpu_margin_mib, manifest.gpu_free_threshold_mib)
        got = choose(waiting, self._gpus(), self._running(), self.flights, limits)
        if isinstance(got, str):
            if ledger.update(job, reason=f"{why}; {got}"):
                ledger.changed(job)
            return
        self.flights.append(got)
        victim = ledger.jobs[got.victim]
        stop = self.stops.stop_for(victim, preempting=True)
        if ledger.update(job, reason=got.reason()):
            ledger.changed(job)
        count = preemptions(victim) + 1
        self.ctx.bus.publish(JobPreempted(project=self.ctx.project, at=self.ctx.clock(),
                                          job=victim.id, by=job.id, host=got.host,
                                          gpus=got.gpus, signal=stop.signal, count=count))
        self.ctx.bus.alert("info", f"{victim.id} (priority {victim.priority}) preempted by "
                           f"{job.id} (priority {job.priority}) on {got.where()}: SIG"
                           f"{stop.signal}, {stop.grace_s:g} s to save, then SIGKILL; it "
                           f"resumes from its checkpoint later (preemption {count})",
                           host=got.host, job=victim.id)
        self.stops.begin(victim, stop, preempted_by=job.id)

    def _gpus(self) -> list[Gpu]:
        gpus = []
        for view in self._views:
            for gpu in view.gpus:
                usable = (view.usable and gpu.index not in view.quarantined
                          and (view.allowed is None or gpu.index in view.allowed))
                gpus.append(Gpu(view.name, gpu.index, gpu.memory_total_mib,
                                gpu.others_mib or 0, usable))
        return gpus

    def _running(self) -> list[Running]:
        plan = self.memory.plan() if self.memory is not None else None
        specs = self.ctx.ledger.specs
        found = []
        for job in self.ctx.ledger.jobs.values():
            attempt = job.current
            spec = specs.get(job.id)
            if job.status != JobStatus.RUNNING or attempt is None or spec is None:
                continue
            hold = plan.hold(job).mib if plan is not None else None
            # one being stopped (a preemption's, a drain's: tick/stops.py) still holds its
            # GPUs but is no victim again
            most = 0 if attempt.failure_class == FailureClass.REQUEUED else spec.max_preemptions
            found.append(Running(job.id, attempt.host, tuple(attempt.gpus), job.priority,
                                 attempt.start or attempt.decided_at or 0.0, hold,
                                 spec.checkpoint is not None, preemptions(job), most))
        return found


def _allowed(view: HostView) -> frozenset[int]:
    return view.allowed if view.allowed is not None else frozenset(g.index for g in view.gpus)


def _only(view: HostView, gpus: frozenset[int]) -> HostView:
    return replace(view, allowed=gpus)
