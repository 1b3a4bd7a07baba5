"""Results, the engine's part: when an attempt ends, its metrics are read once on its host (one
command over the host's connection, in the background), set on the job (`metrics`, published
like any change) and written with every job's status to results.jsonl in the run dir
(atomically, at most once a second and at the end). When a phase, or the whole queue, is done
and its results are in, its `on_complete` command runs (results/hooks.py).

It follows the jobs through the bus (job_state_changed, queue_finished), so the tick has no
step of its own for it; running jobs' latest numbers ride on the probe's last log line, which
front ends parse themselves (results.parse.log_numbers)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from eq_tui.api.events import Event, JobStateChanged, QueueFinished
from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.errors import HostError
from eq_tui.manifest.model import Manifest
from eq_tui.results import hooks
from eq_tui.results.collect import collect, wanted_files
from eq_tui.results.cost import cost_record
from eq_tui.results.group import group
from eq_tui.results.parse import Metrics
from eq_tui.results.records import RESULTS_FILE, Record, dumps, make_record, read_records
from eq_tui.results.render import render_markdown
from eq_tui.results.resumed import continued
from eq_tui.results.settings import from_manifest
from eq_tui.runfiles.atomic import write_atomic

WRITE_EVERY_S = 1.0
PER_HOST = 4  # reads at once on one host
PENDING_S = 30.0  # an ended job's metrics not read by then are not waited for (searches)
CLOSE_WAIT_S = 600.0  # at shutdown: collections and hooks still running get this long


class Harvest:
    def __init__(self, ctx: RunContext, lock: asyncio.Lock) -> None:
        self.ctx = ctx
        self.lock = lock
        self.collected: dict[str, Record] = {}  # job id -> its last collected record
        self._tasks: set[asyncio.Task[None]] = set()
        self._limits: dict[str, asyncio.Semaphore] = {}
        self._consumer: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[Event] | None = None
        self._dirty = False
        self._writer: asyncio.Task[None] | None = None
        self._hooks_done: set[str] = set()
        self._collecting: set[str] = set()  # job ids whose metrics are being read
        self._noted: set[str] = set()  # collect's notes already alerted
        self._lines: dict[str, tuple[tuple[Any, ...], str]] = {}  # job id -> (its key, line)
        self._pending_since: dict[str, float] = {}  # job id -> when its metrics were awaited
        self._series: dict[str, tuple[int, Any]] = {}  # job id -> (attempt, series) last read

    @property
    def path(self) -> Path:
        return self.ctx.run_dir.path / RESULTS_FILE

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Take back what a previous engine collected, and follow the jobs from here."""
        for record in read_records(self.ctx.run_dir.path) or []:
            if record.get("collected_at") is not None:
                self.collected[record["id"]] = record
        self._hooks_done = hooks.already_ran(self.ctx.run_dir.path)
        self._queue = self.ctx.bus.subscribe()
        self._consumer = asyncio.ensure_future(self._follow(self._queue))
        for job, attempt in self._uncollected():
            self._collecting.add(job.id)
            self._spawn(self._collect(job, attempt))
        self._dirty = True
        self._schedule_write()  # a run read while nothing has changed yet still has the file
        self._spawn(self._check_phases())

    def _uncollected(self) -> list[tuple[JobState, Attempt]]:
        """Attempts that ended while no engine read them: a previous engine killed between an
        attempt's end and the reading of its metrics (the job would keep an earlier attempt's
        numbers, or none)."""
        found = []
        for job in self.ctx.ledger.jobs.values():
            placed = job.placed
            if job.status.is_active or placed is None or not placed.launched \
                    or placed.end is None:
                continue
            record = self.collected.get(job.id)
            if record is None or int(record.get("attempt") or 0) < placed.n:
                found.append((job, placed))
        return found

    async def close(self) -> None:
        """Let collections and hooks in flight end (bounded), then write the file."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_WAIT_S):
                while self._tasks:
                    await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self._consumer is not None:
            self._consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._consumer
        if self._queue is not None:
            self.ctx.bus.unsubscribe(self._queue)
        self.write()

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _follow(self, queue: asyncio.Queue[Event]) -> None:
        while True:
            event = await queue.get()
            if isinstance(event, JobStateChanged):
                self._dirty = True
                old, new = JobStatus(event.old), JobStatus(event.new)
                job = self.ctx.ledger.jobs.get(event.job)
                placed = job.placed if job is not None else None
                if old.is_active and not new.is_active and job is not None and placed is not None:
                    self._collecting.add(job.id)
                    self._spawn(self._collect(job, placed))
                else:
                    self._spawn(self._check_phases())
                self._schedule_write()
            elif isinstance(event, QueueFinished):
                self._spawn(self._check_phases())

    # ---- collecting ------------------------------------------------------------------------

    async def _collect(self, job: JobState, attempt: Attempt) -> None:
        try:
            await self._read(job, attempt)
        finally:
            self._collecting.discard(job.id)
        await self._check_phases()

    async def _read(self, job: JobState, current: Attempt) -> None:
        """Read the attempt that ended (even if the job has been launched again since)."""
        ctx = self.ctx
        record = ctx.hosts.get(current.host)
        runner = getattr(record.host, "runner", None) if record is not None else None
        spec = ctx.ledger.specs.get(job.id)
        if record is None or runner is None:
            return  # a host with no shell (the tests' in-memory host): nothing to read
        wanted = wanted_files(spec.metrics if spec else None, attempt_dir=current.attempt_dir,
                              run_dir=ctx.run_dir_value(), job_id=job.id, attempt=current.n)
        limit = self._limits.setdefault(current.host, asyncio.Semaphore(PER_HOST))
        try:
            async with limit:
                found = await collect(runner, wanted, cwd=ctx.cwd_for(current.host),
                                      pattern=spec.metrics.pattern
                                      if spec and spec.metrics else None)
        except (HostError, OSError, TimeoutError) as exc:
            ctx.bus.alert("warning", f"{job.id}: metrics not read: {exc}", host=current.host,
                          job=job.id)
            return
        for note in found.notes:
            if note not in self._noted:  # once a run: every job of a sweep would say the same
                self._noted.add(note)
                ctx.bus.alert("info", f"{job.id}: {note}", host=current.host, job=job.id)
        async with self.lock:
            self._apply(job, current.n, found.metrics, found.sources)

    def _apply(self, job: JobState, attempt: int, metrics: Metrics, sources: tuple[str, ...]
               ) -> None:
        read = self._series.get(job.id)
        if read is None and job.id in self.collected:
            record = self.collected[job.id]
            read = (int(record.get("attempt") or 0), record.get("series") or {})
        current = next((a for a in job.history if a.n == attempt), None)
        if current is not None and current.resumed_from and read and read[0] < attempt:
            # it went on from a checkpoint: its series continues the attempts' before it
            metrics = continued(read[1], metrics)
        spec = self.ctx.ledger.specs.get(job.id)
        if spec is not None and spec.checkpoint is not None and (read is None
                                                                or read[0] <= attempt):
            # read late: still what a resume carries (kept only where a resume can happen)
            self._series[job.id] = (attempt, metrics)
        if job.current is None or job.current.n != attempt:
            return  # a newer attempt started meanwhile: its own exit is collected
        self.collected[job.id] = make_record(
            job_id=job.id, phase=job.phase, params=job.params, attempt=attempt,
            status=str(job.status), metrics=metrics, sources=sources,
            collected_at=self.ctx.clock(), cmd=job.cmd)
        values = self.collected[job.id]["metrics"]
        if self.ctx.ledger.update(job, metrics=values):
            self.ctx.ledger.changed(job)
        self._dirty = True
        self._schedule_write()

    def metrics_pending(self, job: JobState) -> bool:
        """The metrics of the job's ended attempt are not in yet: being read, or its end not
        seen here yet (bounded: a read that failed is waited for PENDING_S at most)."""
        if job.id in self._collecting:
            return True
        current = job.current
        if current is None or not job.status.is_finished:
            return False
        record = self.collected.get(job.id)
        if record is not None and record.get("attempt") == current.n:
            return False
        first = self._pending_since.setdefault(job.id, self.ctx.clock())
        return self.ctx.clock() - first < PENDING_S

    # ---- results.jsonl ---------------------------------------------------------------------

    def records(self) -> list[Record]:
        """One record per job: its status now, its metrics as last collected, and what it cost
        (a job that never ran has no `cost`)."""
        out = []
        for job in self.ctx.ledger.jobs.values():
            done = self.collected.get(job.id)
            attempt = job.current.n if job.current else 0
            if done is not None:
                record = {**done, "status": str(job.status), "params": job.params,
                          "phase": job.phase}
            else:
                record = make_record(job_id=job.id, phase=job.phase, params=job.params,
                                     attempt=attempt, status=str(job.status), metrics={},
                                     cmd=job.cmd)
            if job.history:
                series = record.pop("series", {})  # the series stays last in a line
                record["cost"] = cost_record(job.history)
                record["series"] = series
            out.append(record)
        return out

    def write(self) -> None:
        """results.jsonl, whole: each job's line is serialised again only when it changed."""
        self._dirty = False
        lines = []
        for job, record in zip(self.ctx.ledger.jobs.values(), self.records(), strict=True):
            key = (record["status"], record["attempt"], record.get("collected_at"), job.phase,
                   tuple(job.params.items()), record.get("cmd"),
                   tuple((record.get("cost") or {}).values()))
            cached = self._lines.get(job.id)
            if cached is None or cached[0] != key:
                cached = self._lines[job.id] = (key, dumps([record]))
            lines.append(cached[1])
        write_atomic(self.path, "".join(lines))

    def _schedule_write(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._write_soon())

    async def _write_soon(self) -> None:
        await asyncio.sleep(WRITE_EVERY_S)
        if self._dirty:
            with contextlib.suppress(OSError):
                self.write()

    async def summary_table(self) -> str:
        """The results table for summary.md (once what is being read is in; a hook running
        meanwhile is not waited for)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(60):
                while self._collecting:
                    await asyncio.sleep(0.05)
        settings = from_manifest(self.ctx.manifest)
        records = self.records()
        if not any(r["metrics"] for r in records):
            return ""
        table = group(records, group_over=settings.group_over, goals=settings.goals)
        return "## Results\n\n" + render_markdown(table)

    # ---- on_complete -----------------------------------------------------------------------

    def _phase_done(self, phase: str | None) -> bool:
        """Every job (of the phase) has finished and none's metrics are still being read."""
        jobs = [j for j in self.ctx.ledger.jobs.values() if phase is None or j.phase == phase]
        return bool(jobs) and all(j.status.is_finished and j.id not in self._collecting
                                  for j in jobs)

    async def _check_phases(self) -> None:
        """Run each phase's on_complete once its jobs have finished and their metrics are in
        (and the top level's once every job has)."""
        manifest = self.ctx.manifest
        due: list[tuple[str, str, str]] = []  # (name, phase for EQ_PHASE, command)
        for phase in manifest.phases:
            command = phase.results.on_complete
            if command and phase.name not in self._hooks_done and self._phase_done(phase.name):
                due.append((phase.name, phase.name, command))
        top = manifest.results.on_complete
        if top and hooks.QUEUE not in self._hooks_done and self._phase_done(None):
            due.append((hooks.QUEUE, "", top))
        if not due:
            return
        for name, _, _ in due:
            self._hooks_done.add(name)
        self.write()
        for name, phase_name, command in due:
            await self._run_hook(name, phase_name, command)

    async def _run_hook(self, name: str, phase: str, command: str) -> None:
        ctx = self.ctx
        outcome = await hooks.run_hook(command, name=name, phase=phase,
                                       run_dir=ctx.run_dir.path, results=self.path,
                                       cwd=Path(ctx.manifest.source).resolve().parent)
        ctx.bus.alert("info" if outcome.ok else "error", outcome.message())



def results_settings(manifest: Manifest) -> tuple[dict[str, str], str]:
    """For the snapshot's settings: which way is better per metric, the key averaged over."""
    settings = from_manifest(manifest)
    return settings.goals, settings.group_over
