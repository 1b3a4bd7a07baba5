"""Early stopping: read the reports running jobs print and stop the losers (status `pruned`).

The reports ride on the probe each host already gets: for a job whose phase has `early_stop:`,
the probe returns its log from the offset read so far (`ProbeRequest.follow`), and each
complete line that prints the metric (the way `metrics:` reads a log: key=value, or its
`pattern:`) is one report. The reports and the offset are the job's (`JobState.reports`, in the
state file): a restarted engine goes on from there. `decide/pruning.py` judges each new report;
a loser's session is stopped like a kill and the ledger records it `pruned` (not a failure:
never retried, no person needed, not the crash guard's business), with the reason in words.
The probe that finds an attempt ended still carries its log from that offset, and its last
reports are read (never judged): a job that finished between two looks counts with its whole
run against the others. A report made when the whole job is at its end (`epoch 9/9`, read as
`api/job_progress.py` reads a job's lines: never a per-epoch or an evaluation bar at 100 %) is
never judged, and a job at its end is not judged again as others reach its rung: it is
finishing anyway. A search's trial jobs are read here and judged by Optuna's pruner
(tick/search_pruning.py), which stops a pruned trial's jobs with `prune`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from functools import lru_cache

from eq_tui.api.events import JobPruned
from eq_tui.api.job_progress import JobProgress
from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.decide.pruning import Config, Entry, Pruned, judge, last_rung
from eq_tui.engine.tick.search_trials import ORIGIN as TRIAL
from eq_tui.errors import HostError
from eq_tui.hosts.base import AttemptProbe, AttemptRef
from eq_tui.manifest.model import EarlyStopSpec, MetricsSpec
from eq_tui.results.group import configuration
from eq_tui.results.parse import log_lines, read_log_line
from eq_tui.results.stacks import LineRead, Reports

FOLLOW_BYTES = 65536  # what probe.sh sends of a followed log at most per probe

StopSession = Callable[[JobState, str], Awaitable[None]]


@lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def at_end(progress: JobProgress) -> bool:
    """The whole job is at its end (epoch N of N; never a per-epoch or evaluation bar)."""
    return progress.fraction is not None and progress.fraction >= 1.0


def line_read(line: str, metrics: MetricsSpec | None) -> LineRead:
    """One log line read the way `metrics:` reads a log (its `pattern:`, else the stacks')."""
    pattern = _compiled(metrics.pattern) if metrics is not None and metrics.pattern else None
    return read_log_line(line, pattern)


def line_value(line: str, metric: str, metrics: MetricsSpec | None) -> float | None:
    """The metric's value in one log line, read the way `metrics:` reads a log."""
    return line_read(line, metrics).metrics.get(metric)


class EarlyStop:
    def __init__(self, ctx: RunContext, stop_session: StopSession) -> None:
        self.ctx = ctx
        self.stop_session = stop_session
        # per job: the attempt its report counter is for, and the counter (a redraw repeats
        # the last value; a restarted engine goes on from the last report kept)
        self._counters: dict[str, tuple[int, Reports]] = {}
        # per job: the reports of each metric its current attempt's log printed (for "never
        # seen": what was read instead, and whether it has evaluated at all)
        self.names_seen: dict[str, tuple[int, dict[str, int]]] = {}
        # per job: how far its whole run is, from the lines followed (a report at its end is
        # not judged; a per-epoch bar at 100 % is no end)
        self._progress: dict[str, tuple[int, JobProgress]] = {}

    def spec_for(self, job: JobState) -> EarlyStopSpec | None:
        if job.run_to_end:
            return None
        try:
            return self.ctx.manifest.phase(job.phase).results.early_stop
        except KeyError:
            return None

    def enabled(self) -> bool:
        return any(phase.results.early_stop is not None for phase in self.ctx.manifest.phases)

    def offsets(self, refs: Iterable[AttemptRef]) -> tuple[tuple[str, int], ...]:
        """The logs to follow in this probe, from where each was read to."""
        if not self.enabled():
            return ()
        jobs = self.ctx.ledger.jobs
        out = []
        for ref in refs:
            job = jobs.get(ref.key)
            if job is None or job.status != JobStatus.RUNNING or self.spec_for(job) is None:
                continue
            out.append((ref.key, job.reports_offset if job.reports_attempt == job.attempts
                        else 0))
        return tuple(out)

    async def check(self, probed: set[str]) -> None:
        """Read the new reports of the running jobs on the hosts probed, and stop the losers."""
        if not self.enabled():
            return
        ctx = self.ctx
        jobs = ctx.ledger.jobs
        judged: list[tuple[JobState, EarlyStopSpec, list[tuple[int, bool]]]] = []
        finished_grew = False
        for host in probed:
            record = ctx.hosts.get(host)
            snap = record.snapshot if record is not None else None
            if snap is None or not snap.ok:
                continue
            for key, probe in snap.attempts.items():
                job = jobs.get(key)
                spec = self.spec_for(job) if job is not None else None
                if job is None or spec is None or probe.followed_from is None:
                    continue
                if job.status == JobStatus.RUNNING:
                    new = self._ingest(job, spec, probe)
                    if new and job.origin != TRIAL:
                        judged.append((job, spec, new))
                elif job.reports_attempt == job.attempts:
                    # it ended since the last look: its last reports are read, never judged,
                    # so the rung tables hold the whole run of a job that finished
                    finished_grew |= bool(self._ingest(job, spec, probe))
        losers = []
        for job, spec, new in judged:
            verdict = self._judge(job, spec, new)
            if verdict is not None:
                losers.append((job, spec, verdict))
        if judged or finished_grew:
            # the rung tables grew: who ran on with fewer rivals may be a loser now
            losers += self._judge_again({job.id for job, _, _ in losers})
        if losers:
            await asyncio.gather(*(self.prune(job, spec, verdict)
                                   for job, spec, verdict in losers))

    def _ingest(self, job: JobState, spec: EarlyStopSpec,
                probe: AttemptProbe) -> list[tuple[int, bool]]:
        """Add the reports in the probe's new log bytes; the step of each, and whether the
        job was at its end when it made it."""
        ledger = self.ctx.ledger
        if job.reports_attempt != job.attempts:
            current = job.current
            if current is not None and current.resumed_from is not None:
                # it goes on from a checkpoint: the reports so far stand
                ledger.update(job, reports_offset=0, reports_attempt=job.attempts,
                              reports_carried=len(job.reports))
            else:
                ledger.update(job, reports=[], report_fractions=None, reports_offset=0,
                              reports_attempt=job.attempts, reports_carried=0)
        if probe.followed_from is None or probe.followed_from != job.reports_offset:
            return []
        data = probe.followed
        end = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if end < 0:
            if len(data) >= FOLLOW_BYTES:
                # one line longer than a probe carries
                ledger.update(job, reports_offset=job.reports_offset + len(data))
            return []
        chunk = data[:end + 1]
        ledger.update(job, reports_offset=job.reports_offset + len(chunk))
        metrics = self._metrics_of(job)
        counter = self._counter(job, spec)
        seen = self._names(job)
        progress = self._progress_of(job)
        now = self.ctx.clock()
        new: list[tuple[int, bool]] = []
        for line in log_lines(chunk.decode("utf-8", errors="replace")):
            progress.observe(line, now)
            read = line_read(line, metrics)
            reported = counter.new(read)
            for name in reported:
                seen[name] = seen.get(name, 0) + 1
            value = reported.get(spec.metric)
            if value is not None:
                if job.reports_carried and len(job.reports) == job.reports_carried:
                    self._trim_carried(job, progress.fraction)
                fractions = job.report_fractions or [None] * len(job.reports)
                ledger.update(job, reports=[*job.reports, value],
                              report_fractions=[*fractions, progress.fraction])
                new.append((len(job.reports), at_end(progress)))
        if new:
            ledger.changed(job)
        return new

    def _trim_carried(self, job: JobState, fraction: float | None) -> None:
        """At a resumed attempt's first own report: the reports carried over that were made
        at or past where it resumed (it makes them again) go; without a position, all stay."""
        fractions = job.report_fractions or []
        keep = job.reports_carried
        if fraction is not None:
            keep = next((i for i, f in enumerate(fractions[:keep])
                         if f is not None and f >= fraction - 1e-9), keep)
        self.ctx.ledger.update(job, reports=job.reports[:keep],
                               report_fractions=fractions[:keep] or None, reports_carried=keep)

    def _counter(self, job: JobState, spec: EarlyStopSpec) -> Reports:
        held = self._counters.get(job.id)
        if held is None or held[0] != job.attempts:
            counter = Reports()
            if len(job.reports) > job.reports_carried:  # a restarted engine: its own last
                counter.seed(spec.metric, job.reports[-1])
            held = self._counters[job.id] = (job.attempts, counter)
        return held[1]

    def _progress_of(self, job: JobState) -> JobProgress:
        held = self._progress.get(job.id)
        if held is None or held[0] != job.attempts:
            progress = JobProgress()
            progress.cmd_totals(job.cmd)
            held = self._progress[job.id] = (job.attempts, progress)
        return held[1]

    def finishing(self, job: JobState) -> bool:
        """Its whole run is at its end by the lines read of its current attempt."""
        held = self._progress.get(job.id)
        return held is not None and held[0] == job.attempts and at_end(held[1])

    def _names(self, job: JobState) -> dict[str, int]:
        held = self.names_seen.get(job.id)
        if held is None or held[0] != job.attempts:
            held = self.names_seen[job.id] = (job.attempts, {})
        return held[1]

    def _metrics_of(self, job: JobState) -> MetricsSpec | None:
        spec = self.ctx.ledger.specs.get(job.id)
        return spec.metrics if spec is not None else None

    def _config(self, job: JobState) -> Config:
        group_over = self.ctx.manifest.phase(job.phase).results.group_over
        config = configuration(job.params, job.id, group_over)
        return (job.phase, *(f"{k}={v}" for k, v in sorted(config.items())))

    def _entries(self, phase: str) -> list[Entry]:
        return [Entry(job.id, self._config(job), job.reports)
                for job in self.ctx.ledger.jobs.values()
                if job.phase == phase and job.reports]

    def _judge(self, job: JobState, spec: EarlyStopSpec,
               new: list[tuple[int, bool]]) -> Pruned | None:
        entries: list[Entry] | None = None
        config = self._config(job)
        for step, at_end in new:
            if at_end:
                continue  # its last report: it is finishing anyway
            if entries is None:
                entries = self._entries(job.phase)
            verdict = judge(spec, config, step,
                            [e for e in entries if e.job != job.id]
                            + [Entry(job.id, config, job.reports[:step])])
            if verdict is not None:
                return verdict
        return None

    def _judge_again(self, skip: set[str]) -> list[tuple[JobState, EarlyStopSpec, Pruned]]:
        """Each running job at the last rung it passed (median: the furthest report another
        configuration made too), against who reached it since."""
        losers = []
        by_phase: dict[str, list[Entry]] = {}
        for job in self.ctx.ledger.jobs.values():
            spec = self.spec_for(job)
            if job.id in skip or spec is None or job.status != JobStatus.RUNNING \
                    or job.origin == TRIAL \
                    or job.reports_attempt != job.attempts or self.finishing(job):
                continue
            if job.phase not in by_phase:
                by_phase[job.phase] = self._entries(job.phase)
            config = self._config(job)
            reached = max((len(e.reports) for e in by_phase[job.phase] if e.config != config),
                          default=0)
            rung = last_rung(spec, len(job.reports), reached)
            if rung is None:
                continue
            verdict = judge(spec, config, rung, by_phase[job.phase])
            if verdict is not None:
                reason = (f"pruned at report {len(job.reports)}: "
                          + verdict.reason.removeprefix(f"pruned at report {rung}: ")
                          + f" at report {rung}, as others reached it")
                losers.append((job, spec, replace(verdict, reason=reason)))
        return losers

    async def prune(self, job: JobState, spec: EarlyStopSpec, verdict: Pruned) -> None:
        ctx = self.ctx
        try:
            await self.stop_session(job, verdict.reason)
        except HostError as exc:
            ctx.bus.alert("warning", f"{job.id}: {verdict.reason}, but its session could not "
                          f"be stopped: {exc}", host=job.host, job=job.id)
            return
        if job.status != JobStatus.RUNNING:
            return  # it ended meanwhile
        ctx.ledger.update(job, retry_at=None, failure=None, reason=verdict.reason)
        ctx.ledger.set_status(job, JobStatus.PRUNED, detail=verdict.reason)
        ctx.bus.publish(JobPruned(project=ctx.project, at=ctx.clock(), job=job.id,
                                  phase=job.phase, host=job.host, attempt=job.attempts,
                                  metric=spec.metric, step=verdict.step,
                                  value=round(verdict.value, 6),
                                  cutoff=round(verdict.cutoff, 6), rivals=verdict.rivals,
                                  rule=spec.rule, detail=verdict.reason))
