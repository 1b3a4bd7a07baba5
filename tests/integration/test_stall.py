"""Hang detection: the rules on their own (a fake clock), then on real screen sessions with
simulated GPUs (hung, NCCL-hung and quietly busy fake jobs)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eq_tui.api.events import JobStalled
from eq_tui.engine.engine import Engine
from eq_tui.engine.tick.stall import DEFAULT_FLOOR_S, Track, own_utilisation
from eq_tui.errors import HostError
from eq_tui.hosts.base import AttemptProbe, GpuProcess, GpuReading, HostSnapshot, Stop
from eq_tui.manifest.model import HostSpec, JobSpec, Manifest
from eq_tui.sim.state import run_intervals
from tests.support.engine_run import job, make_manifest, sim_hosts, start_engine
from tests.support.memory_host import MemoryHost


def probe(size: int, line: str = "") -> AttemptProbe:
    return AttemptProbe(key="j", session_alive=True, pid=1, pid_alive=True, started=0.0,
                        exit_code=None, exited_at=None, log_size=size, output_ok=None,
                        last_line=line)


def test_progress_that_resets_each_epoch_under_an_epoch_counter_still_advances() -> None:
    # a tqdm bar per epoch goes back to 0%; the epoch counter beside it keeps progress growing
    track = Track(attempt=1, size=0, grown_at=0.0, busy_at=0.0, progressed_at=0.0)
    track.observe(probe(10, "Epoch 1/10:  90%|█████████ | 90/100"), [90], 1.0)
    track.observe(probe(20, "Epoch 2/10:  10%|█         | 10/100"), [90], 2.0)
    assert track.progressed_at == 2.0 and track.progress == pytest.approx(0.11)


def test_silence_on_idle_gpus_is_a_stall_but_silence_on_busy_gpus_is_not() -> None:
    track = Track(attempt=1, size=10, grown_at=0.0, busy_at=0.0, progressed_at=0.0)
    for now in (5.0, 10.0, 15.0, 20.0):
        track.observe(probe(10), [97], now)  # a quiet evaluation: silent, GPU busy
    assert track.signs(20.0, 20.0) == ["log_silent"]
    idle = Track(attempt=1, size=10, grown_at=0.0, busy_at=0.0, progressed_at=0.0)
    for now in (5.0, 10.0, 15.0, 20.0):
        idle.observe(probe(10), [0, 3], now)  # every GPU under 5 %
    assert idle.signs(20.0, 20.0) == ["log_silent", "gpus_idle"]
    assert idle.signs(20.0, 19.0) == []  # not yet a whole window


def test_a_growing_log_that_never_advances_on_idle_gpus_is_a_stall() -> None:
    track = Track(attempt=1, size=0, grown_at=0.0, busy_at=0.0, progressed_at=0.0)
    for i, now in enumerate(range(1, 31, 3)):
        track.observe(probe(100 * (i + 1), "step 7/100 retrying batch"), [0], float(now))
    assert track.signs(25.0, 30.0) == ["gpus_idle", "no_progress"]


def test_unknown_utilisation_never_counts_as_idle() -> None:
    track = Track(attempt=1, size=0, grown_at=0.0, busy_at=0.0, progressed_at=0.0)
    track.observe(probe(0), [None], 50.0)
    assert "gpus_idle" not in track.signs(20.0, 50.0)


def test_silence_counts_from_the_look_that_saw_the_log_grow() -> None:
    # the line seen at 10 may have been written at 10: it is not silent for 20 s before 30
    track = Track(attempt=1, size=0, grown_at=0.0, busy_at=0.0, progressed_at=0.0)
    track.observe(probe(0), [0], 8.0)
    track.observe(probe(10), [0], 10.0)
    assert track.grown_at == 10.0
    assert track.signs(20.0, 29.9) == ["gpus_idle"]
    assert track.signs(20.0, 30.0) == ["log_silent", "gpus_idle"]


@settings(max_examples=300, deadline=None)
@given(window=st.floats(1.0, 60.0), poll=st.floats(0.1, 5.0),
       gaps=st.lists(st.floats(0.05, 1.0), min_size=1, max_size=40),
       write_at=st.lists(st.floats(0.0, 200.0), max_size=30), hang_after=st.floats(0.0, 100.0))
def test_a_silent_log_is_called_never_early_and_within_its_window_plus_two_polls(
        window: float, poll: float, gaps: list[float], write_at: list[float],
        hang_after: float) -> None:
    """Lines written at `write_at` (none after `hang_after`), looked at every poll or sooner
    (watcher-woken ticks come between polls): at every look, `log_silent` holds only when no
    line was written for a whole window, and it holds once the last line is a window and two
    polls old."""
    writes = sorted(t for t in write_at if t <= hang_after)
    looks, now = [], 0.0
    while now < hang_after + window + 3 * poll:
        looks.append(now)
        now += poll * gaps[len(looks) % len(gaps)]
    track: Track | None = None
    for look in looks:
        size = sum(1 for t in writes if t <= look)
        if track is None:  # the first look that saw the job running starts its silence
            track = Track(attempt=1, size=size, grown_at=look, busy_at=look, progressed_at=look)
        track.observe(probe(size), [99], look)
        last = max([t for t in writes if t <= look] + [looks[0]])
        silent = "log_silent" in track.signs(window, look)
        assert not silent or look - last >= window  # never early
        if look - last >= window + 2 * poll:
            assert silent  # a hang is called within its window plus two polls


def test_the_default_window_is_ten_minutes_or_three_times_the_longest_gap() -> None:
    track = Track(attempt=1, size=0, grown_at=0.0, busy_at=0.0, progressed_at=0.0)
    track.observe(probe(10), [90], 100.0)
    assert track.window(None) == DEFAULT_FLOOR_S
    track.observe(probe(20), [90], 400.0)  # a 300 s gap between log lines
    assert track.window(None) == 900.0
    assert track.window(20.0) == 20.0 and track.window(0.0) == 0.0


def test_a_watchdog_line_is_a_hang_at_once() -> None:
    track = Track(attempt=1, size=0, grown_at=0.0, busy_at=0.0, progressed_at=0.0)
    track.observe(probe(10, "[Rank 0] Watchdog caught collective operation timeout: "
                            "WorkNCCL(SeqNum=1, Timeout(ms)=600000)"), [99], 1.0)
    assert track.hang_line


# ---- on real sessions ------------------------------------------------------------------------

HUNG = "fake-train --epochs 50 --epoch-seconds 0.2 --mem 1000 --hang-after 1"


def stalls(run: object, job_id: str) -> list[JobStalled]:
    return [e for e in run.events  # type: ignore[attr-defined]
            if isinstance(e, JobStalled) and e.job == job_id]


@pytest.mark.integration
async def test_a_silent_job_on_idle_gpus_is_marked_stalled_and_keeps_running(
        tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("hung", HUNG, stall_after=1.0)])
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        # the event reaches the collector a loop turn after the ledger records the stall
        await run.wait_for(lambda: bool(stalls(run, "hung")))
        assert run.engine.jobs["hung"].stalled_since is not None
        stalled = stalls(run, "hung")[0]
        assert set(stalled.signs) == {"log_silent", "gpus_idle"}
        assert stalled.action == "alert" and stalled.silent_s >= 1.0
        record = run.engine.jobs["hung"].to_json()
        assert record["status"] == "running" and record["silent_since"] is not None
        assert any("stalled: silent" in a["message"] for a in run.engine.ctx.bus.alerts)
        result = await run.engine.command("kill", ["hung"])
        assert result["ok"]
        await run.wait_for(lambda: run.engine.jobs["hung"].stalled_since is None)
    finally:
        await run.stop()


@pytest.mark.integration
async def test_a_quiet_evaluation_on_busy_gpus_is_never_stalled(tmp_path: Path) -> None:
    # prints nothing for 6 s with the GPU busy, against a 2 s window
    manifest = make_manifest(tmp_path, [job(
        "quiet", "fake-train --epochs 1 --epoch-seconds 6 --mem 1000", stall_after=2.0)])
    run = await start_engine(manifest, tmp_path / "run")
    assert run.task is not None
    code = await run.task
    assert code == 0 and run.status("quiet") == "completed"
    assert stalls(run, "quiet") == []


def hang_actions(actions: list[str], last: list[str]) -> bool:
    """The hang's own actions end the list; before them a loaded box may have held back a line
    for longer than the window (a slow start): each such alert is followed by its recovery."""
    before = actions[:-len(last)]
    return actions[-len(last):] == last and before == ["alert", "recovered"] * (len(before) // 2)


@pytest.mark.integration
async def test_restart_requeues_a_hung_job_as_stalled_on_another_gpu(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job(
        "hung", f"{HUNG} --hang-attempts 1 --epochs 3", stall_after=0.8, on_stall="restart")],
        hosts=sim_hosts(("sim", 2)))
    run = await start_engine(manifest, tmp_path / "run")
    assert run.task is not None
    code = await run.task
    assert code == 0
    record = run.job("hung")
    first, second = record["history"]
    assert first["failure_class"] == "stalled" and second["failure_class"] is None
    assert first["gpus"] != second["gpus"]  # never the GPU it hung on
    assert record["retries_by_class"] == {"stalled": 1}
    actions = [e.action for e in stalls(run, "hung")]
    assert hang_actions(actions, ["alert", "restart"]), actions
    assert ("running", "pending") in run.transitions("hung")


@pytest.mark.integration
async def test_a_restarted_hung_job_never_goes_back_to_its_gpu(tmp_path: Path) -> None:
    # one GPU only: after the restart the job waits rather than run there again
    manifest = make_manifest(tmp_path, [job(
        "hung", f"{HUNG} --hang-attempts 1", stall_after=0.6, on_stall="restart")],
        hosts=sim_hosts(("sim", 1)))
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        await run.wait_for(lambda: run.status("hung") == "pending"
                           and run.engine.jobs["hung"].retries_by_class.get("stalled") == 1)
        probes = run.engine.probes_by_host["sim"]
        await run.wait_for(lambda: run.engine.probes_by_host["sim"] >= probes + 5)
        assert run.status("hung") == "pending" and run.engine.jobs["hung"].attempts == 1
    finally:
        await run.stop()


@pytest.mark.integration
async def test_an_nccl_watchdog_line_is_a_stall_at_once_and_kill_stops_it(
        tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job(
        "nccl", f"{HUNG} --nccl-hang", stall_after=3600.0, on_stall="kill")])
    run = await start_engine(manifest, tmp_path / "run")
    assert run.task is not None
    code = await run.task
    assert code == 1
    record = run.job("nccl")
    assert record["status"] == "killed"
    assert record["failure"]["class"] == "stalled"
    assert "Watchdog caught collective operation timeout" in record["failure"]["detail"]
    assert hang_actions([e.action for e in stalls(run, "nccl")], ["alert", "kill"])
    assert "hang_line" in stalls(run, "nccl")[0].signs


# ---- the engine with an injected clock (an in-memory host: deterministic) ----------------------

async def clocked_engine(tmp_path: Path, host: MemoryHost, stall_after: float) -> Engine:
    """An engine on `host` alone, on its clock, running one job `a` that a stall restarts."""
    source = tmp_path / "m.yaml"
    source.touch()
    manifest = Manifest(project="p", source=str(source), hosts=(HostSpec(name="m"),),
                        jobs=(JobSpec(id="a", phase="main", cmd="train", stall_after=stall_after,
                                      on_stall="restart"),))
    engine = Engine(manifest, tmp_path / "run", {"m": host},  # type: ignore[dict-item]
                    clock=lambda: host.now, watch=False)
    await engine.start(preflight=False)
    return engine


async def test_on_an_injected_clock_a_job_is_stalled_after_its_window_and_restarted_after_two(
        tmp_path: Path) -> None:
    host = MemoryHost("m", gpus=2)  # its GPUs read 0 % utilisation
    engine = await clocked_engine(tmp_path, host, 60.0)
    await engine.tick()
    job = engine.jobs["a"]
    host.current("a").log.append("epoch 1/10")
    host.now += 5
    await engine.tick()  # running, its log grew
    host.now += 55
    await engine.tick()
    assert job.stalled_since is None  # silent for 55 s of a 60 s window (counted from 1005)
    host.now += 10
    await engine.tick()
    assert job.stalled_since == host.now and job.silent_since == 1005.0
    assert job.status == "running"
    host.now += 59
    await engine.tick()
    assert job.status == "running"  # restart comes a second window after the stall
    host.now += 1
    await engine.tick()  # marks the attempt (on disk) and stops it beside the ticks
    assert job.history[0].failure_class == "stalled" and job.retries_by_class == {}
    saved = json.loads((tmp_path / "run" / "queue_state.json").read_text())
    assert saved["jobs"][0]["history"][0]["failure_class"] == "stalled"  # before the signal
    await engine.launcher.stops.settle()
    assert host.kills == [job.history[0].session]
    assert job.status == "pending" and job.retries_by_class == {"stalled": 1}
    await engine.tick()
    assert job.status == "running" and job.gpus == [1]  # attempt 2, not on GPU 0
    engine.ctx.run_dir.release_lock()


async def test_a_stall_stop_whose_answer_is_lost_still_restarts_the_job(tmp_path: Path) -> None:
    """The host ends the stalled session but its answer never comes back (a cut link; or the
    engine died during the stop): the session's exit by the stop's signal is the stall's
    restart, never an ordinary `exit_nonzero` that leaves the job stuck (the chaos run's lost
    hung job). Red before the stop was marked: the job ended stuck, exit_nonzero."""
    class LostAnswer(MemoryHost):
        async def kill(self, session: str, attempt_dir: str, launcher: Any, reason: str = "",
                       stop: Any = None) -> Any:
            self.kills.append(session)
            self.finish(self.sessions[attempt_dir].request.job_id, 143)
            raise HostError(f"{self.name}: connection lost")

    host = LostAnswer("m", gpus=2)
    engine = await clocked_engine(tmp_path, host, 10.0)
    await engine.tick()
    job = engine.jobs["a"]
    while not host.kills:  # running, then stalled, then a window later stopped
        host.now += 11
        await engine.tick()
        await engine.launcher.stops.settle()
    assert host.kills == [job.history[0].session] and job.status == "running"
    await engine.tick()  # the judge sees the marked attempt ended: the stall's verdict
    assert job.history[0].failure_class == "stalled" and job.history[0].exit_code == 143
    assert job.retries_by_class == {"stalled": 1}
    await engine.tick()
    assert job.status == "running" and len(host.launches) == 2
    engine.ctx.run_dir.release_lock()


async def test_a_job_given_its_grace_to_save_is_never_called_stalled(tmp_path: Path) -> None:
    """A job being stopped (a preemption's or a drain's grace to write its checkpoint) is
    silent by right: however long the grace, the stall watch neither flags nor restarts it."""
    class SlowSave(MemoryHost):
        saved = asyncio.Event()

        async def kill(self, session: str, attempt_dir: str, launcher: Any, reason: str = "",
                       stop: Any = None) -> Any:
            self.kills.append(session)
            await self.saved.wait()
            return await super().kill(session, attempt_dir, launcher, reason)

    host = SlowSave("m", gpus=1)
    engine = await clocked_engine(tmp_path, host, 10.0)
    events = engine.subscribe()
    await engine.tick()
    await engine.tick()
    job = engine.jobs["a"]
    assert job.status == "running"
    stop = engine.launcher.stops.begin(job, Stop(grace_s=600))
    for _ in range(6):  # a minute of silence: six windows
        host.now += 11
        await engine.tick()
    assert job.stalled_since is None and len(host.kills) == 1
    seen = [events.get_nowait() for _ in range(events.qsize())]
    assert not [e for e in seen if isinstance(e, JobStalled)]
    host.saved.set()
    assert stop is not None
    await stop
    assert job.status == "pending" and job.history[0].failure_class == "requeued"
    engine.ctx.run_dir.release_lock()


@pytest.mark.integration
async def test_a_clone_keeps_its_sources_stall_watch(tmp_path: Path) -> None:
    """The stall watch reads the ledger's spec of a job made at run time, not the manifest's
    (which has no such job): a clone of a `stall_after: 1s, on_stall: kill` job that hangs is
    killed as stalled."""
    manifest = make_manifest(tmp_path, [job("a", stall_after=1.0, on_stall="kill")])
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        await run.wait_for(lambda: run.status("a") == "completed")
        clone = await run.engine.command("clone", ["a"], {"cmd": HUNG})
        assert clone["ok"], clone
        await run.wait_for(lambda: run.status("a-clone1") == "killed", timeout=30.0)
        assert run.engine.jobs["a-clone1"].failure is not None
        assert run.engine.jobs["a-clone1"].failure.cls == "stalled"
        assert hang_actions([e.action for e in stalls(run, "a-clone1")], ["alert", "kill"])
    finally:
        await run.stop()


@pytest.mark.integration
async def test_a_hang_beside_a_computing_neighbour_is_caught_while_the_neighbour_computes(
        tmp_path: Path) -> None:
    """Three jobs share one GPU: the card reads busy all along, so only each job's own
    utilisation (the probe's per-process reading) tells the hung one apart; a quiet job that
    computes without printing beside them is never flagged."""
    window = 2.0
    # busy outlasts the quiet job (8 s) and the hung one's kill (about 4.5 s in) with room
    jobs = [job("busy", "fake-train --epochs 24 --epoch-seconds 0.5 --mem 2000", mem_mib=2000),
            job("hung", HUNG, mem_mib=2000, stall_after=window, on_stall="kill"),
            job("quiet", "fake-train --epochs 1 --epoch-seconds 8 --mem 2000", mem_mib=2000,
                stall_after=window)]
    run = await start_engine(make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 1))),
                             tmp_path / "run")
    try:
        await run.wait_for(lambda: run.status("hung") == "killed", timeout=60)
        await run.wait_for(lambda: run.engine.finished, timeout=60)
    finally:
        await run.stop()
    assert hang_actions([e.action for e in stalls(run, "hung")], ["alert", "kill"])
    assert {"log_silent", "gpus_idle"} <= set(stalls(run, "hung")[0].signs)
    assert stalls(run, "quiet") == [] and run.status("quiet") == "completed"
    spans = {i.job: i for i in run_intervals(run.runs())}
    # from the host's records: the hung job ended (killed) while its neighbour still computed
    assert spans["hung"].end < spans["busy"].end
    assert spans["busy"].exit == 0


def test_own_utilisation_reads_the_jobs_processes_and_is_blind_on_a_shared_card() -> None:
    gpus = (GpuReading(0, "G0", "sim", 4000, 24576, 97), GpuReading(1, "G1", "sim", 0, 24576, 3))
    mine = GpuProcess(11, "G0", 2000, pgid=10, sid=10)
    theirs = GpuProcess(21, "G0", 2000, pgid=20, sid=20)
    shared = HostSnapshot("h", True, 0.0, gpus=gpus, processes=(mine, theirs))
    assert own_utilisation(shared, [0], 10) is None  # the card's 97 % is anyone's
    sampled = HostSnapshot("h", True, 0.0, gpus=gpus, processes=(
        replace(mine, util_pct=0), replace(theirs, util_pct=97)))
    assert own_utilisation(sampled, [0], 10) == [0]
    assert own_utilisation(sampled, [0], 20) == [97]
    alone = HostSnapshot("h", True, 0.0, gpus=gpus, processes=(replace(mine, gpu_uuid="G1"),))
    assert own_utilisation(alone, [1], 10) == [3]  # alone on it: the card's figure is its own
