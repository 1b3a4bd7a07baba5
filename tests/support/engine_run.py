"""Run a real engine on simulated hosts (real screen sessions, fake GPUs) inside a test."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eq_tui.api.events import Event
from eq_tui.engine.commands.control_server import serve_control
from eq_tui.engine.engine import Engine
from eq_tui.hosts.factory import make_hosts, sim_state_dir
from eq_tui.manifest.model import HostSpec, JobSpec, Manifest, OomRetry, PhaseSpec, SimulateSpec
from eq_tui.notify.notifier import Notifier, serve_notifications
from eq_tui.sim.state import read_runs

FAST_JOB = "fake-train --epochs 2 --epoch-seconds 0.1 --mem 2000"


def sim_hosts(*specs: tuple[str, int], memory_mib: int = 24576,
              linger_s: float = 0.0) -> tuple[HostSpec, ...]:
    return tuple(HostSpec(name=name, simulate=SimulateSpec(gpus=gpus, memory_mib=memory_mib,
                                                           model=f"Sim {name}",
                                                           linger_s=linger_s))
                 for name, gpus in specs)


def make_manifest(tmp: Path, jobs: list[JobSpec], *, hosts: tuple[HostSpec, ...] | None = None,
                  phases: tuple[PhaseSpec, ...] | None = None, project: str = "t",
                  **kwargs: Any) -> Manifest:
    source = tmp / "manifest.yaml"
    source.touch()
    return Manifest(project=project, source=str(source), jobs=tuple(jobs),
                    hosts=hosts or sim_hosts(("sim", 2)),
                    phases=phases or (PhaseSpec(name="main"),),
                    oom_retry=kwargs.pop("oom_retry", OomRetry(delay=0.3, max_attempts=3)),
                    stale_grace_s=kwargs.pop("stale_grace_s", 1.0), **kwargs)


def job(id: str, cmd: str = FAST_JOB, **kwargs: Any) -> JobSpec:
    return JobSpec(id=id, phase=kwargs.pop("phase", "main"), cmd=cmd, **kwargs)


@dataclass
class EngineRun:
    engine: Engine
    manifest: Manifest
    run_dir: Path
    events: list[Event] = field(default_factory=list)
    task: asyncio.Task[int] | None = None
    notifier: Notifier | None = None
    queue: asyncio.Queue[Event] | None = None

    @property
    def state(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / "queue_state.json").read_text())
        return data

    def job(self, job_id: str) -> dict[str, Any]:
        return next(j for j in self.state["jobs"] if j["id"] == job_id)

    def runs(self, host: str = "sim") -> list[dict[str, Any]]:
        return read_runs(sim_state_dir(self.run_dir, host))

    def epochs_run(self, job_id: str) -> dict[int, list[int]]:
        """attempt -> the epochs fake-train finished in it, from its own records on the host."""
        done: dict[int, list[int]] = {}
        for record in self.runs():
            if record.get("event") == "epoch" and record.get("job") == job_id:
                done.setdefault(int(record["attempt"]), []).append(int(record["epoch"]))
        return done

    def transitions(self, job_id: str) -> list[tuple[str, str]]:
        return [(e.old, e.new) for e in self.events
                if getattr(e, "job", None) == job_id and e.type == "job_state_changed"]

    def take_events(self) -> None:
        """Move what the engine has published into `events` now: an event published in the
        same step as a state change otherwise reaches the collector a loop turn later."""
        while self.queue is not None and not self.queue.empty():
            self.events.append(self.queue.get_nowait())

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not predicate():
            if self.task is not None and self.task.done():
                self.task.result()
                if not predicate():
                    raise AssertionError("engine stopped before the expected state")
                return
            if asyncio.get_running_loop().time() > deadline:
                jobs = [(j.id, str(j.status)) for j in self.engine.jobs.values()]
                raise AssertionError(f"timed out; jobs: {jobs}")
            await asyncio.sleep(0.05)
            self.take_events()
        self.take_events()

    async def ticks_pass(self, count: int = 3, timeout: float = 30.0) -> None:
        """Wait until `count` more full ticks have begun (so at least `count - 1` have probed,
        judged and decided since the call): what a tick would wrongly do has had its chance."""
        target = self.engine.pacing.full_ticks + count
        self.engine.wake()
        deadline = asyncio.get_running_loop().time() + timeout
        while self.engine.pacing.full_ticks < target:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{count} ticks did not pass in {timeout}s")
            await asyncio.sleep(0.02)
        self.take_events()

    def status(self, job_id: str) -> str:
        return str(self.engine.jobs[job_id].status)

    async def stop(self) -> None:
        await self.engine.stop()
        if self.task is not None:
            await self.task


async def start_engine(manifest: Manifest, run_dir: Path, *, poll: float = 0.2,
                       exit_when_done: bool = True, control: bool = True,
                       ssh_config: str | None = None, await_command: float = 0.0) -> EngineRun:
    engine = Engine(manifest, run_dir, make_hosts(manifest, run_dir, ssh_config=ssh_config),
                    poll=poll, exit_when_done=exit_when_done, await_command=await_command)
    queue = engine.subscribe()
    run = EngineRun(engine=engine, manifest=manifest, run_dir=run_dir, queue=queue)

    async def collect() -> None:
        while True:
            run.events.append(await queue.get())

    await engine.start()
    if control:
        await serve_control(engine, run_dir)
    run.notifier = await serve_notifications(engine, run_dir)
    collector = asyncio.create_task(collect())
    run.task = asyncio.create_task(engine.run())

    def finished(_: object) -> None:
        run.take_events()
        collector.cancel()

    run.task.add_done_callback(finished)
    return run


async def run_to_end(manifest: Manifest, run_dir: Path, *, timeout: float = 60.0,
                     poll: float = 0.2) -> tuple[int, EngineRun]:
    run = await start_engine(manifest, run_dir, poll=poll)
    assert run.task is not None
    try:
        code = await asyncio.wait_for(asyncio.shield(run.task), timeout)
    except TimeoutError:
        await run.stop()
        raise AssertionError(
            f"queue did not finish in {timeout}s: "
            f"{[(j.id, str(j.status)) for j in run.engine.jobs.values()]}") from None
    await asyncio.sleep(0)  # let the collector take the last events
    return code, run
