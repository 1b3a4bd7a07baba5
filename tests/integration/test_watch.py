"""The per-host watcher: watch.sh's facts (exit records, GPU memory releases) on a simulated
host, the engine's watcher manager, and the engine ticking on those facts between polls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eq_tui.engine.tick.host_watchers import HostWatchers
from eq_tui.errors import HostError
from eq_tui.hosts.base import AttemptRef, ProbeRequest
from eq_tui.hosts.local import make_sim_host
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.hosts.watch import (
    WatchedAttempt,
    WatchEnd,
    WatchEvent,
    WatchRequest,
    parse_watch_line,
    watch_stdin,
)
from eq_tui.sim.state import find_overlaps, init_sim_state, read_runs, set_quirk
from tests.support.engine_run import job, make_manifest, sim_hosts, start_engine

# ---- the line protocol ---------------------------------------------------------------------


def test_watch_lines_parse_into_events_and_ends() -> None:
    assert parse_watch_line("R\n") == WatchEvent("ready")
    assert parse_watch_line("X\tjob_1\n") == WatchEvent("exited", key="job_1")
    assert parse_watch_line("F\t3\t120\n") == WatchEvent("released", gpu=3, used_mib=120)
    assert parse_watch_line("E\tnvidia-smi: driver gone\n") == WatchEvent(
        "error", detail="nvidia-smi: driver gone")
    assert parse_watch_line("Q\tdone\n") == "done"
    assert parse_watch_line("Q\tlifetime\n") == "lifetime"
    for noise in ("H\n", "", "X\t\n", "F\tx\t1\n", "Q\tsoon\n", "garbage"):
        assert parse_watch_line(noise) is None


def test_watch_requests_refuse_fields_that_would_break_the_line_format() -> None:
    good = WatchRequest(attempts=(WatchedAttempt("a", "/tmp/x y", (0, 1)),), draining=(2,))
    assert watch_stdin(good) == b"A\ta\t/tmp/x y\t0,1\nG\t2\n"
    with pytest.raises(HostError):
        watch_stdin(WatchRequest(attempts=(WatchedAttempt("a", "/tmp/x\ty", ()),)))


# ---- watch.sh on a simulated host ----------------------------------------------------------


def sim_host(tmp_path: Path, *, linger_s: float = 0.0) -> tuple[ShellHost, Path]:
    state = tmp_path / "sim"
    init_sim_state(state, host="w", gpus=2, memory_mib=8000, linger_s=linger_s)
    return make_sim_host("w", str(state), str(tmp_path / "logs")), state


async def collect(host: ShellHost, request: WatchRequest,
                  during: Callable[[list[tuple[float, WatchEvent]]], object] | None = None,
                  timeout: float = 30.0) -> tuple[WatchEnd, list[tuple[float, WatchEvent]]]:
    seen: list[tuple[float, WatchEvent]] = []
    end = await asyncio.wait_for(
        host.watch(request, lambda event: seen.append((time.time(), event))), timeout)
    return end, seen


async def test_an_exit_record_is_reported_then_the_gpu_once_its_memory_is_released(
        tmp_path: Path) -> None:
    host, state = sim_host(tmp_path, linger_s=1.0)
    attempt = tmp_path / "attempt"
    attempt.mkdir()
    # a real fake job on GPU 1 whose memory lingers for a second after it exits
    env = dict(host.runner.env or {}, CUDA_VISIBLE_DEVICES="1")  # type: ignore[attr-defined]
    process = await asyncio.create_subprocess_exec(
        "sh", "-c", f"fake-train --epochs 1 --epoch-seconds 0.3 --mem 3000; "
                    f"echo $? > {attempt}/exit", env=env)
    request = WatchRequest(attempts=(WatchedAttempt("j", str(attempt), (1,)),),
                           threshold_mib=500, interval_s=0.1)
    end, seen = await collect(host, request)
    await process.wait()
    kinds = [event.kind for _at, event in seen]
    assert end == "done"
    assert kinds == ["ready", "exited", "released"]
    assert seen[2][1].gpu == 1 and (seen[2][1].used_mib or 0) < 500
    released_at = seen[2][0]
    ended = [r for r in read_runs(state) if r.get("event") == "end"]
    assert len(ended) == 1
    # never before the simulated memory was really released
    assert released_at >= float(ended[0]["linger_until"])


async def test_a_failing_nvidia_smi_stops_gpu_watching_with_an_error(tmp_path: Path) -> None:
    host, state = sim_host(tmp_path)
    set_quirk(state, "fail")
    end, seen = await collect(host, WatchRequest(draining=(0,), interval_s=0.1))
    assert end == "done"
    assert [event.kind for _at, event in seen] == ["ready", "error"]
    assert "nvidia-smi" in seen[1][1].detail


async def test_the_watcher_ends_after_its_lifetime(tmp_path: Path) -> None:
    host, _state = sim_host(tmp_path)
    attempt = tmp_path / "never"
    attempt.mkdir()
    request = WatchRequest(attempts=(WatchedAttempt("j", str(attempt), (0,)),), lifetime_s=1,
                           interval_s=0.1)
    end, seen = await collect(host, request)
    assert end == "lifetime"
    assert [event.kind for _at, event in seen] == ["ready"]


# ---- the engine's watcher manager ----------------------------------------------------------


class ScriptedHost:
    """A host whose watcher replays a script of events (the manager's logic, not the shell)."""

    name = "h"
    watches_gpus = True

    def __init__(self, events: list[WatchEvent], end: WatchEnd = "done",
                 fail: bool = False) -> None:
        self.events, self.end, self.fail = events, end, fail
        self.requests: list[WatchRequest] = []

    async def watch(self, request: WatchRequest,
                    on_event: Callable[[WatchEvent], None]) -> WatchEnd:
        self.requests.append(request)
        if self.fail:
            raise HostError("cannot stream")
        for event in self.events:
            on_event(event)
        return self.end


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_an_exit_is_reported_once_however_often_the_watcher_restarts() -> None:
    host = ScriptedHost([WatchEvent("exited", key="a"), WatchEvent("released", gpu=0)],
                        end="lifetime")
    seen: list[tuple[str, WatchEvent]] = []
    watchers = HostWatchers({"h": host}, lambda name, e: seen.append((name, e)))  # type: ignore[dict-item]
    request = WatchRequest(attempts=(WatchedAttempt("a", "/d/a1", (0,)),))
    watchers.sync({"h": request})
    await settle()
    watchers.sync({"h": request})  # ended by lifetime: started again with the same request
    await settle()
    assert len(host.requests) == 2
    assert [e.kind for _n, e in seen] == ["exited", "released", "released"]
    # a new attempt of the same job is a new exit
    watchers.sync({"h": WatchRequest(attempts=(WatchedAttempt("a", "/d/a2", (0,)),))})
    await settle()
    assert [e.kind for _n, e in seen].count("exited") == 2
    await watchers.close()


async def test_an_unchanged_request_keeps_its_watcher_and_an_empty_one_stops_it() -> None:
    host = ScriptedHost([], end="done")
    watchers = HostWatchers({"h": host}, lambda name, e: None)  # type: ignore[dict-item]
    request = WatchRequest(draining=(1,))
    watchers.sync({"h": request})
    await settle()
    watchers.sync({"h": request})  # ended "done" with nothing new to watch: not restarted
    await settle()
    assert len(host.requests) == 1
    # it still covers the host's GPUs: the next sync starts it again for what is asked then
    # (a drain wait placed in the tick of its last attempt's exit relies on that)
    assert not watchers.watching("h") and watchers.covers_gpus("h")
    watchers.sync({"h": WatchRequest()})
    await settle()
    assert not watchers.watching("h")
    await watchers.close()


async def test_a_watcher_that_cannot_start_is_retried_only_after_a_pause() -> None:
    clock = [100.0]
    host = ScriptedHost([], fail=True)
    watchers = HostWatchers({"h": host}, lambda name, e: None,  # type: ignore[dict-item]
                            clock=lambda: clock[0])
    request = WatchRequest(draining=(0,))
    watchers.sync({"h": request})
    await settle()
    watchers.sync({"h": request})
    await settle()
    assert len(host.requests) == 1 and not watchers.covers_gpus("h")
    clock[0] += 10
    watchers.sync({"h": request})
    await settle()
    assert len(host.requests) == 2
    await watchers.close()


# ---- the engine, event-driven ------------------------------------------------------------------

@pytest.mark.integration
async def test_with_a_long_poll_freed_gpus_still_get_their_next_job_from_the_watcher(
        tmp_path: Path) -> None:
    """Poll every 60 s: without the watcher this queue would take minutes. Memory lingers
    after each job; no job may start on a GPU before its memory was released."""
    jobs = [job(f"j{i}", "fake-train --epochs 2 --epoch-seconds 0.2 --mem 3000 --linger 0.6")
            for i in range(6)]
    manifest = make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 2), memory_mib=8000))
    run = await start_engine(manifest, tmp_path / "run", poll=60.0)
    assert run.task is not None
    code = await asyncio.wait_for(run.task, 60)
    assert code == 0
    engine = run.engine
    assert engine.pacing.full_ticks == 1  # only the first tick was a poll
    # so every exit was found by a watcher: reported, or seen by the tick a report woke. That
    # tick probes both GPUs, so at least three reports for six exits; not one per job, since
    # the watcher restarted without an attempt a tick has judged never reports it.
    # Each later launch came in such a tick, on the watcher's reading of the release, as a
    # drain wait on the host, or on the tick's own probe when the memory was gone by then.
    assert engine.pacing.watch_wakeups >= 3
    assert engine.watchers.started >= 1
    runs = run.runs("sim")
    assert find_overlaps(runs, include_linger=True) == []
    assert sum(1 for r in runs if r.get("event") == "start") == 6


@pytest.mark.integration
async def test_a_job_killed_while_its_session_starts_has_that_session_stopped(
        tmp_path: Path) -> None:
    """Launches run beside the next tick. A kill that lands while the session is still being
    started (held back here until the kill is through) must not leave the job running."""
    manifest = make_manifest(tmp_path, [job("slow", "fake-train --epochs 100 "
                                                    "--epoch-seconds 0.2 --mem 1000")])
    run = await start_engine(manifest, tmp_path / "run", poll=0.2)
    host = run.engine.hosts["sim"]
    assert isinstance(host, ShellHost)
    release = asyncio.Event()
    launching = asyncio.Event()
    real_launch = host.launch

    async def held_launch(request: Any) -> None:
        launching.set()
        await release.wait()
        await real_launch(request)

    host.launch = held_launch  # type: ignore[method-assign]
    await asyncio.wait_for(launching.wait(), 20)
    assert run.status("slow") == "launching"
    result = await run.engine.command("kill", ["slow"])
    assert result["ok"], result
    assert run.status("slow") == "killed"
    release.set()
    attempt = run.engine.jobs["slow"].current
    assert attempt is not None

    async def session_alive() -> bool:
        snap = await host.probe(ProbeRequest(attempts=(AttemptRef(
            "slow", attempt.session, attempt.attempt_dir, None),)))
        return attempt.session in snap.sessions

    # the session comes up (its wrapper writes pgid first), then the engine stops it
    deadline = time.monotonic() + 30
    while not (Path(attempt.attempt_dir) / "pgid").exists():
        assert time.monotonic() < deadline, "the held launch never started its session"
        await asyncio.sleep(0.05)
    while await session_alive():
        assert time.monotonic() < deadline, "the killed job's session was left running"
        await asyncio.sleep(0.1)
    runs = run.runs("sim")
    started = {r["pid"] for r in runs if r.get("event") == "start"}
    assert started <= {r["pid"] for r in runs if r.get("event") == "end"}
    assert run.status("slow") == "killed"
    await run.stop()


@pytest.mark.integration
async def test_a_probe_that_looked_before_a_session_started_does_not_lose_its_job(
        tmp_path: Path) -> None:
    """A probe runs outside the engine's lock, so a launch can return while it is out. Its
    snapshot, taken before the session existed, shows nothing for the job: that must not
    count as the job lost (requeued and started a second time beside the first)."""
    manifest = make_manifest(tmp_path, [job("one", "fake-train --epochs 100 "
                                                   "--epoch-seconds 0.2 --mem 1000")])
    run = await start_engine(manifest, tmp_path / "run", poll=0.2)
    host = run.engine.hosts["sim"]
    assert isinstance(host, ShellHost)
    real_launch, real_probe = host.launch, host.probe
    launching, release_launch = asyncio.Event(), asyncio.Event()
    probed, release_probe = asyncio.Event(), asyncio.Event()

    async def held_launch(request: Any) -> None:
        launching.set()
        await release_launch.wait()
        await real_launch(request)

    async def held_probe(request: ProbeRequest) -> Any:
        snapshot = await real_probe(request)
        if launching.is_set() and not probed.is_set() and request.attempts:
            probed.set()  # taken while the session was not there yet
            await release_probe.wait()
        return snapshot

    host.launch = held_launch  # type: ignore[method-assign]
    host.probe = held_probe  # type: ignore[method-assign]
    await asyncio.wait_for(probed.wait(), 20)
    assert run.status("one") == "launching"
    release_launch.set()
    deadline = time.monotonic() + 30
    while run.status("one") != "running":  # the launch returned while the probe is out
        assert time.monotonic() < deadline, run.status("one")
        await asyncio.sleep(0.02)
    release_probe.set()
    ticks = run.engine.pacing.ticks
    while run.engine.pacing.ticks < ticks + 5:  # the held snapshot is applied, then fresh ones
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    state = run.engine.jobs["one"]
    assert run.status("one") == "running"
    assert state.attempts == 1 and len(state.history) == 1
    assert sum(1 for r in run.runs("sim") if r.get("event") == "start") == 1
    await run.stop()


class HeldProbe:
    """A real simulated host whose probes wait while `held` (a slow host that keeps a full
    tick's probes out)."""

    def __init__(self, host: Any) -> None:
        self.host = host
        self.held = False
        self.waiting = 0  # probes waiting now
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.host, name)

    async def probe(self, request: ProbeRequest) -> Any:
        if self.held:
            self.waiting += 1
            try:
                await self.release.wait()
            finally:
                self.waiting -= 1
        return await self.host.probe(request)


async def all_running_on_held_hosts(manifest: Any, run_dir: Path, *, poll: float
                                    ) -> tuple[Any, dict[str, HeldProbe], asyncio.Task[int]]:
    """An engine on the manifest's simulated hosts, each wrapped in a HeldProbe, running until
    every job is: the engine, the hosts and its run task."""
    from eq_tui.api.model import JobStatus
    from eq_tui.engine.engine import Engine
    from eq_tui.hosts.factory import make_hosts

    hosts = {name: HeldProbe(host) for name, host in make_hosts(manifest, run_dir).items()}
    engine = Engine(manifest, run_dir, hosts, poll=poll)  # type: ignore[arg-type]
    await engine.start()
    task = asyncio.create_task(engine.run())
    deadline = time.monotonic() + 30
    while not all(j.status == JobStatus.RUNNING for j in engine.jobs.values()):
        assert time.monotonic() < deadline and not task.done()
        await asyncio.sleep(0.05)
    return engine, hosts, task


@pytest.mark.integration
async def test_an_exit_is_judged_while_a_slow_hosts_probe_keeps_the_full_tick_out(
        tmp_path: Path) -> None:
    """A full tick waits for every host's answer. An exit a watcher reports meanwhile is judged
    by a tick of its own that probes just its host, not after the slow host answers."""
    from eq_tui.api.model import JobStatus

    manifest = make_manifest(tmp_path, [
        job("long", "fake-train --epochs 300 --epoch-seconds 0.2 --mem 1000"),
        job("quick", "fake-train --epochs 6 --epoch-seconds 0.5 --mem 1000")],
        hosts=sim_hosts(("a", 1), ("b", 1)))
    engine, hosts, task = await all_running_on_held_hosts(manifest, tmp_path / "run", poll=0.5)
    try:
        deadline = time.monotonic() + 30
        slow = hosts[engine.jobs["long"].host or ""]
        slow.held = True
        while engine.jobs["quick"].status == JobStatus.RUNNING:
            assert time.monotonic() < deadline + 30 and not task.done()
            await asyncio.sleep(0.05)
        assert engine.jobs["quick"].status == JobStatus.COMPLETED
        assert slow.waiting >= 1  # the full tick's probe of the slow host is still out
    finally:
        for host in hosts.values():
            host.release.set()
        await engine.command("kill", ["long"])
        await engine.stop()
        await task


@pytest.mark.integration
async def test_an_exit_is_judged_while_two_other_exits_probes_are_out(tmp_path: Path) -> None:
    """Exit ticks run side by side: with the probes of two hosts whose jobs have exited held
    out, a third host's exit is still judged (before, the second exit's tick was awaited and
    every later exit waited for it)."""
    from eq_tui.api.model import JobStatus

    manifest = make_manifest(tmp_path, [
        job(f"j{name}", f"fake-train --epochs {epochs} --epoch-seconds 0.5 --mem 1000")
        for name, epochs in (("a", 4), ("b", 8), ("c", 12))],
        hosts=sim_hosts(("a", 1), ("b", 1), ("c", 1)))
    engine, hosts, task = await all_running_on_held_hosts(manifest, tmp_path / "run",
                                                          poll=120.0)
    try:
        deadline = time.monotonic() + 30
        first, second = (hosts[engine.jobs[key].host or ""] for key in ("ja", "jb"))
        first.held = second.held = True
        while engine.jobs["jc"].status == JobStatus.RUNNING:
            assert time.monotonic() < deadline and not task.done(), (first.waiting,
                                                                     second.waiting)
            await asyncio.sleep(0.05)
        assert engine.jobs["jc"].status == JobStatus.COMPLETED
        # the other two exits' ticks are still out: their jobs not judged yet
        assert first.waiting >= 1 and second.waiting >= 1
        assert engine.jobs["ja"].status == engine.jobs["jb"].status == JobStatus.RUNNING
        for host in hosts.values():
            host.release.set()
        while not all(j.status == JobStatus.COMPLETED for j in engine.jobs.values()):
            assert time.monotonic() < deadline + 30 and not task.done()
            await asyncio.sleep(0.05)
    finally:
        for host in hosts.values():
            host.release.set()
        await engine.stop()
        await task


@pytest.mark.integration
async def test_a_probe_older_than_the_hosts_snapshot_is_not_taken_in(tmp_path: Path) -> None:
    """Two ticks' probes of one host can come back out of order: the older one is dropped, its
    host leaves the tick's probed set, and the newer snapshot stays."""
    import dataclasses

    manifest = make_manifest(tmp_path, [job("j", "fake-train --epochs 300 --epoch-seconds 0.2")],
                             hosts=sim_hosts(("a", 1)))
    run = await start_engine(manifest, tmp_path / "run")
    engine = run.engine
    try:
        await run.wait_for(lambda: engine.ctx.hosts["a"].snapshot is not None)
        async with engine.lock:  # between two ticks' takes
            newer = engine.ctx.hosts["a"].snapshot
            assert newer is not None
            older = dataclasses.replace(newer, taken_at=newer.taken_at - 1.0, gpus=())
            probed = {"a"}
            engine.observation.apply({"a": ProbeRequest()}, [older], probed)
            assert probed == set() and engine.ctx.hosts["a"].snapshot is newer
            later = dataclasses.replace(newer, taken_at=newer.taken_at + 0.001)
            probed = {"a"}
            engine.observation.apply({"a": ProbeRequest()}, [later], probed)
            assert probed == {"a"} and engine.ctx.hosts["a"].snapshot is later
    finally:
        await engine.command("kill", ["j"])
        await run.stop()
