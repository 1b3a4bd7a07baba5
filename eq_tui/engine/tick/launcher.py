"""Starting sessions: an attempt is recorded `launching` and written to disk, then its session
is started on its host (in the background while the next tick runs, or awaited)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.context import RunContext, shell_path
from eq_tui.engine.decide.scheduler import Launch
from eq_tui.engine.state.naming import attempt_dir, session_name
from eq_tui.engine.tick.claims import ticket, undo_refused
from eq_tui.engine.tick.drain_launch import DrainLaunches
from eq_tui.engine.tick.judge import LAUNCH_GRACE_S
from eq_tui.engine.tick.resume import Resumes
from eq_tui.engine.tick.stops import BackgroundStops
from eq_tui.engine.tick.tick_timing import Pacing
from eq_tui.errors import HostError
from eq_tui.hosts.base import PERSON_STOP, LaunchRequest, Stop
from eq_tui.hosts.claims import ClaimRefused
from eq_tui.manifest.launchvars import substitute

PERSIST_AFTER_LAUNCH_S = 0.5
PERSIST_TASK = "eq-tui: persist after launches"


class Launcher:
    def __init__(self, ctx: RunContext, lock: asyncio.Lock, persist: Callable[[], None],
                 pacing: Pacing) -> None:
        self.ctx = ctx
        self._lock = lock
        self._persist = persist
        self.drains = DrainLaunches(ctx, pacing)  # launches that wait for a GPU to drain
        self.resumes = Resumes(ctx)
        self.stops = BackgroundStops(ctx, lock, persist)  # preemptions', drains' (beside ticks)
        self.tasks: set[asyncio.Task[None]] = set()
        # sessions whose background launch has not returned yet: a probe asked meanwhile may
        # look before the session exists, so its "nothing there" proves nothing
        self.in_flight: set[str] = set()
        self._starting_on: dict[asyncio.Task[None], str] = {}  # background launch -> host

    async def log_root(self, host: str) -> str:
        record = self.ctx.hosts[host]
        if record.log_root is None:
            record.log_root = await record.host.log_root(self.ctx.project, self.ctx.token)
        return record.log_root

    async def launch(self, launches: Sequence[Launch], *, background: bool = False) -> None:
        ctx = self.ctx
        now = ctx.clock()
        planned: list[tuple[JobState, LaunchRequest]] = []
        for launch in launches:
            job = ctx.ledger.jobs[launch.job_id]
            try:
                root = await self.log_root(launch.host)
            except HostError as exc:
                ctx.bus.alert("warning", f"{launch.host}: {exc}", host=launch.host)
                continue
            n = len(job.history) + 1
            session = session_name(ctx.project, ctx.token, job.id, n)
            directory = attempt_dir(root, job.id, n)
            cmd = self._render(job.cmd, job, n, launch.gpus)
            ctx.ledger.begin_attempt(job, n=n, host=launch.host, gpus=list(launch.gpus),
                                     session=session, attempt_dir=directory, decided_at=now,
                                     estimate_mib=launch.mem_mib)
            request = self.request(job, n, session, directory, cmd, launch.host, launch.gpus)
            if request.drain is not None:
                ctx.ledger.update(job, reason=(
                    f"launch waits on {launch.host} for the memory of GPU "
                    f"{','.join(map(str, request.drain.gpus))} to be released "
                    f"(the job before it has just ended)"))
            planned.append((job, request))
        if not planned:
            return
        self._persist()  # `launching` is on disk before any session starts
        if background:
            for job, request in planned:
                self.in_flight.add(request.session)
                if request.drain is not None:
                    self.drains.started(request.session, job.host or "", request.drain)
                task = asyncio.create_task(self._launch_in_background(job, request, now))
                self.tasks.add(task)
                self._starting_on[task] = job.host or ""
                task.add_done_callback(self._ended)
            return
        results = await asyncio.gather(*(self._start(job, request) for job, request in planned),
                                       return_exceptions=True)
        for (job, request), result in zip(planned, results, strict=True):
            if isinstance(result, LaunchRequest):
                self._done(job, result, None, now)
            else:
                self._done(job, request, result, now)

    async def _start(self, job: JobState, request: LaunchRequest) -> LaunchRequest:
        """Start the session (resuming from a checkpoint where the job has a contract and this
        is a restart); the request as sent."""
        contract = self.resumes.contract(job, request.attempt)
        if contract is not None:
            n, gpus = request.attempt, request.gpus
            request = await self.resumes.prepare(
                job, request, self._render(contract.path, job, n, gpus),
                self._render(contract.resume, job, n, gpus))
        await self.ctx.hosts[job.host or ""].host.launch(request)
        return request

    async def _launch_in_background(self, job: JobState, request: LaunchRequest,
                                    decided: float) -> None:
        """A launch that does not hold up the next tick (another GPU's exit or release is
        acted on while this session starts). Its outcome is applied under the engine lock."""
        host = self.ctx.hosts[job.host or ""].host
        result: BaseException | None = None
        try:
            request = await self._start(job, request)
        except Exception as exc:
            result = exc
        finally:
            self.in_flight.discard(request.session)
            self.drains.ended(request.session, in_vain=isinstance(result, ClaimRefused))
        async with self._lock:
            current = job.current
            if result is None and (current is None or current.session != request.session
                                   or not job.status.is_active):
                # killed or requeued while its session was starting: stop that session now
                with contextlib.suppress(Exception):
                    await host.kill(request.session, request.attempt_dir,
                                    self.ctx.manifest.launcher)
                return
            self._done(job, request, result, decided)
        self._persist_soon()

    def _done(self, job: JobState, request: LaunchRequest, result: BaseException | None,
              decided: float) -> None:
        ledger = self.ctx.ledger
        if isinstance(result, ClaimRefused):  # another engine's: placed again, nothing spent
            undo_refused(self.ctx, job, str(result))
            return
        if isinstance(result, BaseException):
            # The probe decides: if the session came up after all it is adopted, else the
            # attempt is undone after the grace period. Never launch twice on a guess.
            ledger.update(job, reason=f"launch reported: {result}")
            self.ctx.bus.alert("warning", f"{job.id}: launch on {request.gpus} of {job.host} "
                               f"reported an error: {result}", host=job.host, job=job.id)
            current = job.current
            if current is not None and isinstance(result, HostError):
                ledger.update_attempt(current, decided_at=(current.decided_at or decided)
                                      - LAUNCH_GRACE_S + 5.0)
            ledger.changed(job)
            return
        if request.drain is not None:
            ledger.update(job, reason=None)  # its GPUs drained: it no longer waits
        current = job.current
        if request.resumed_from is not None and current is not None \
                and current.session == request.session:
            ledger.update_attempt(current, resumed_from=request.resumed_from)
            ledger.changed(job)
            self.ctx.bus.alert("info", f"{job.id}: attempt {request.attempt} resumes from "
                               f"{request.resumed_from}", host=job.host, job=job.id)
        if job.status != JobStatus.LAUNCHING:
            return  # the probe saw it running first
        current = job.current
        if current is not None:
            ledger.update_attempt(current, start=self.ctx.clock())
        ledger.set_status(job, JobStatus.RUNNING)

    def _render(self, text: str, job: JobState, n: int, gpus: tuple[int, ...]) -> str:
        """A command's text with the launch-time variables of attempt `n` on `gpus`."""
        return substitute(text, gpus=gpus, run_dir=shell_path(self.ctx.run_dir_value()),
                          attempt=n, job_id=job.id)

    def request(self, job: JobState, n: int, session: str, directory: str, cmd: str,
                host: str, gpus: tuple[int, ...]) -> LaunchRequest:
        manifest = self.ctx.manifest
        env = {name: var.value for name, var in manifest.env.items()}
        env.update({
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)),
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "PYTHONUNBUFFERED": "1",
            "EQ_JOB_ID": job.id,
            "EQ_ATTEMPT": str(n),
            "EQ_PROJECT": self.ctx.project,
            "EQ_RUN_DIR": self.ctx.run_dir_value(),
            "EQ_ATTEMPT_DIR": directory,
        })
        return LaunchRequest(job_id=job.id, attempt=n, session=session, attempt_dir=directory,
                             cwd=self.ctx.cwd_for(host), cmd=cmd, gpus=gpus, env=env,
                             conda=manifest.conda, conda_hook=manifest.conda_hook,
                             launcher=manifest.launcher, venv=manifest.venv,
                             claim=ticket(self.ctx, job, host, gpus),
                             drain=self.drains.wait_for(host, gpus))

    async def stop_session(self, job: JobState, reason: str = "",
                           stop: Stop = PERSON_STOP) -> None:
        """Stop the current attempt as `stop` says: its signal to the job, SIGKILL after its
        grace, then its session (a kill or a requeue by a person; `reason` is recorded in the
        attempt's dir and log)."""
        current = job.current
        if current is None or job.host is None or job.host not in self.ctx.hosts:
            return
        stopped = await self.ctx.hosts[job.host].host.kill(
            current.session, current.attempt_dir, self.ctx.manifest.launcher, reason, stop)
        if stopped.started_at is not None:  # a launch's own clock until a probe read it
            self.ctx.ledger.update_attempt(current, start=stopped.started_at)
        ended = stopped.ended_at
        self.ctx.ledger.end_attempt(current, ended if ended is not None else self.ctx.clock(),
                                    host_clock=ended is not None)
        if stopped.code is not None:  # its own record's, as the host wrote it
            self.ctx.ledger.update_attempt(current, exit_code=stopped.code)

    def _persist_soon(self) -> None:
        """How a launch ended goes to disk shortly, once for the launches that end together
        (each write is two fsyncs on the event loop). Nothing rides on it being at once: the
        attempt was on disk as `launching` before its session started, and a restart finds
        a session that did start."""
        if any(task.get_name() == PERSIST_TASK for task in self.tasks):
            return
        task = asyncio.create_task(self._persist_later(), name=PERSIST_TASK)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _persist_later(self) -> None:
        await asyncio.sleep(PERSIST_AFTER_LAUNCH_S)
        async with self._lock:
            if self.ctx.ledger.unsaved:
                self._persist()

    def _ended(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self._starting_on.pop(task, None)

    async def settle_host(self, host: str) -> None:
        """Wait for the sessions being started on `host` (not under the engine lock: each
        takes it to record how it ended). A drain returns after this: a launch decided
        before it has started by then, none starts after."""
        starting = [task for task, there in self._starting_on.items() if there == host]
        if starting:
            await asyncio.gather(*starting, return_exceptions=True)

    async def settle(self) -> None:
        """Wait for sessions being started (how each launch ended gets recorded) and for the
        stops under way (each stopped job requeued)."""
        while self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.stops.settle()
