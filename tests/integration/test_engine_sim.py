"""The engine end to end on simulated GPUs: real screen sessions, real wrapper, real probes."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import pytest

from eq_tui.engine.engine import Engine
from eq_tui.errors import RunDirError
from eq_tui.hosts.factory import make_hosts, sim_state_dir
from eq_tui.manifest.model import OomRetry, PhaseSpec
from eq_tui.sim.state import find_overlaps, set_foreign
from tests.support.engine_run import (
    FAST_JOB,
    job,
    make_manifest,
    run_to_end,
    sim_hosts,
    start_engine,
)

pytestmark = pytest.mark.integration
LONG_JOB = "fake-train --epochs 200 --epoch-seconds 0.2 --mem 1000"


async def test_a_small_queue_completes_with_an_oom_retry_and_one_stuck(tmp_path: Path) -> None:
    out = tmp_path / "out"
    manifest = make_manifest(tmp_path, [
        job("ok1", f"{FAST_JOB} --output {out}/ok1.json", output_check=f"{out}/ok1.json"),
        job("ok2"),
        job("oom_once", f"{FAST_JOB} --oom-attempts 1"),
        job("bad", f"{FAST_JOB} --exit-code 3"),
    ], hosts=sim_hosts(("a", 2), ("b", 1)))
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 1
    statuses = {j["id"]: j["status"] for j in run.state["jobs"]}
    assert statuses == {"ok1": "completed", "ok2": "completed", "oom_once": "completed",
                        "bad": "stuck"}
    oom = run.job("oom_once")
    assert oom["attempts"] == 2
    assert [a["failure_class"] for a in oom["history"]] == ["cuda_oom", None]
    assert run.job("bad")["failure"]["class"] == "exit_nonzero"
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "completed after a CUDA OOM retry: 1" in summary and "bad" in summary
    assert "ValueError" in summary  # the stuck job's log tail is in the summary
    # a fresh log per attempt: attempt 2's log has no OOM line, attempt 1's has
    first, second = (Path(a["log"]) for a in oom["history"])
    assert "OutOfMemoryError" in first.read_text()
    assert "OutOfMemoryError" not in second.read_text()
    assert first.parent != second.parent


async def test_always_oom_is_launched_exactly_max_attempts_times(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("oom", f"{FAST_JOB} --oom-attempts 99")],
                             oom_retry=OomRetry(delay=0.2, max_attempts=3))
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 1
    record = run.job("oom")
    assert record["status"] == "stuck" and record["failure"]["class"] == "cuda_oom"
    assert record["attempts"] == 3 and len(record["history"]) == 3
    assert sum(1 for r in run.runs() if r["event"] == "oom") == 3


async def test_host_oom_is_not_cuda_oom(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("hostoom", f"{FAST_JOB} --host-oom")])
    code, run = await run_to_end(manifest, tmp_path / "run")
    record = run.job("hostoom")
    assert code == 1 and record["status"] == "stuck"
    assert record["failure"]["class"] == "host_oom"
    assert record["history"][-1]["exit_code"] == 137
    assert record["attempts"] == 1


async def test_stale_session_is_detected_and_cleaned(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("stale", f"{FAST_JOB} --stale-child")],
                             stale_grace_s=0.5)
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 0 and run.job("stale")["status"] == "completed"
    assert any("stale session" in getattr(e, "message", "") for e in run.events)
    snap = await make_hosts(manifest, tmp_path / "run")["sim"].probe(
        __import__("eq_tui.hosts.base", fromlist=["ProbeRequest"]).ProbeRequest())
    assert not [s for s in snap.sessions if "_stale_" in s]


async def test_kill_never_touches_a_job_whose_id_extends_it(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("s1", LONG_JOB), job("s10", LONG_JOB)])
    run = await start_engine(manifest, tmp_path / "run")
    try:
        await run.wait_for(lambda: run.status("s1") == "running" and run.status("s10") == "running")
        result = await run.engine.command("kill", ["s1"])
        assert result["ok"], result
        assert run.status("s1") == "killed"
        await asyncio.sleep(0)  # the next ticks must still see s10 alive
        await run.wait_for(lambda: run.engine.snapshots["sim"].attempts.get("s10") is not None
                           and run.engine.snapshots["sim"].attempts["s10"].session_alive
                           and "s1" not in run.engine.snapshots["sim"].attempts)
        assert run.status("s10") == "running"
        # the GPU of the killed job is free again once its memory is released
        await run.wait_for(lambda: any(g["job"] is None and g["memory_used_mib"] == 0
                                       for g in run.engine.snapshot()["hosts"][0]["gpus"]))
        await run.engine.command("kill", ["s10"])
        assert run.status("s10") == "killed"
    finally:
        await run.stop()


async def test_existing_output_skips_the_job(tmp_path: Path) -> None:
    out = tmp_path / "out" / "done.json"
    out.parent.mkdir()
    out.write_text("{}")
    manifest = make_manifest(tmp_path, [job("done", f"{FAST_JOB} --exit-code 9",
                                            output_check=str(out))])
    code, run = await run_to_end(manifest, tmp_path / "run")
    record = run.job("done")
    assert code == 0 and record["status"] == "completed"
    assert record["history"] == [] and run.runs() == []


async def test_dependency_gating_and_blocked(tmp_path: Path) -> None:
    phases = (PhaseSpec("first"), PhaseSpec("second", depends_on=("first",)))
    manifest = make_manifest(tmp_path, [
        job("a", phase="first"), job("b", f"{FAST_JOB} --exit-code 2", phase="first"),
        job("c", phase="second"),
    ], phases=phases)
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 1
    c = run.job("c")
    assert c["status"] == "blocked" and c["failure"]["class"] == "dependency"
    assert c["history"] == []


async def test_second_phase_starts_after_the_first_completes(tmp_path: Path) -> None:
    phases = (PhaseSpec("first"), PhaseSpec("second", depends_on=("first",)))
    manifest = make_manifest(tmp_path, [job("a", phase="first"), job("b", phase="first"),
                                        job("c", phase="second")], phases=phases)
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 0
    runs = run.runs()
    ends = [r["t"] for r in runs if r["event"] == "end" and r["job"] in ("a", "b")]
    start_c = next(r["t"] for r in runs if r["event"] == "start" and r["job"] == "c")
    assert start_c > max(ends)


async def test_strict_waves_hold_the_next_wave_for_the_slowest_job(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [
        job("w1_fast"), job("w1_slow", "fake-train --epochs 6 --epoch-seconds 0.2 --mem 2000"),
        job("w2_a"), job("w2_b"),
    ], waves="strict")
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 0
    runs = run.runs()
    slow_end = next(r["t"] for r in runs if r["event"] == "end" and r["job"] == "w1_slow")
    for name in ("w2_a", "w2_b"):
        start = next(r["t"] for r in runs if r["event"] == "start" and r["job"] == name)
        assert start > slow_end


async def test_lingering_memory_delays_the_next_launch(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("first"), job("second")],
                             hosts=sim_hosts(("sim", 1), linger_s=1.5))
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 0
    runs = run.runs()
    first_end = next(r["t"] for r in runs if r["event"] == "end" and r["job"] == "first")
    second_start = next(r["t"] for r in runs if r["event"] == "start" and r["job"] == "second")
    assert second_start >= first_end + 1.5
    assert find_overlaps(runs) == []


async def test_someone_elses_memory_keeps_a_gpu_out_of_use(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("j1"), job("j2"), job("j3")],
                             hosts=sim_hosts(("sim", 2)))
    run_dir = tmp_path / "run"
    make_hosts(manifest, run_dir)  # creates the sim state
    set_foreign(sim_state_dir(run_dir, "sim"), [{"gpu": 1, "mib": 5000}])
    code, run = await run_to_end(manifest, run_dir)
    assert code == 0
    assert {r["gpu"] for r in run.runs() if r["event"] == "start"} == {0}
    views = run.engine.snapshot()["hosts"][0]["gpus"]
    assert views[1]["other"] and not views[0]["other"]


async def test_a_second_engine_on_the_same_run_dir_is_refused(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("long", LONG_JOB)])
    run = await start_engine(manifest, tmp_path / "run")
    try:
        other = Engine(manifest, tmp_path / "run", make_hosts(manifest, tmp_path / "run"))
        with pytest.raises(RunDirError, match=r"in use by another engine \(pid \d+\)"):
            await other.start()
    finally:
        await run.engine.command("kill", ["long"])
        await run.stop()


async def test_retry_requeue_and_pause_commands(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("long", LONG_JOB),
                                        job("bad", f"{FAST_JOB} --exit-code 4")])
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        await run.wait_for(lambda: run.status("bad") == "stuck" and run.status("long") == "running")
        assert (await run.engine.command("pause"))["ok"]
        result = await run.engine.command("retry", ["bad"])
        assert result["ok"] and run.status("bad") == "pending"
        assert run.engine.jobs["bad"].attempts == 1  # launches so far, never reset
        # two full ticks after the retry (the first may have begun before it): paused, so
        # nothing launches although a GPU is free
        ticks = run.engine.pacing.full_ticks
        await run.wait_for(lambda: run.engine.pacing.full_ticks >= ticks + 2)
        assert run.status("bad") == "pending" and run.state["paused"] is True
        await run.engine.command("resume")
        await run.wait_for(lambda: run.status("bad") == "stuck" and
                           len(run.engine.jobs["bad"].history) == 2)
        bad = run.job("bad")  # one counter: 2 launches, and no more without a person
        assert (bad["attempts"], bad["attempt_limit"]) == (2, 2)
        requeued = await run.engine.command("requeue", ["long"])
        assert requeued["ok"], requeued
        await run.wait_for(lambda: run.status("long") == "running" and
                           len(run.engine.jobs["long"].history) == 2)
        assert (await run.engine.command("retry", ["long"]))["results"]["long"].startswith(
            "cannot retry")
        assert not (await run.engine.command("kill", ["nope"]))["ok"]
        await run.engine.command("kill", ["long"])
    finally:
        await run.stop()
    assert find_overlaps(run.runs()) == []


STUBBORN_JOB = (
    "python3 -c " + shlex.quote(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "def term(*_):\n"
        "    open(sys.argv[1], 'w').write(repr(time.time()))\n"
        "signal.signal(signal.SIGTERM, term)\n"
        "print('training', flush=True)\n"
        "while True:\n"
        "    time.sleep(0.1)\n"))


async def test_killing_several_jobs_stops_their_sessions_side_by_side(tmp_path: Path) -> None:
    """Each job ignores SIGTERM, so each stop waits out the 5 s grace before SIGKILL: one after
    another that would be 15 s; side by side every job has its TERM before any is ended."""
    ids = [f"stubborn{n}" for n in range(3)]
    manifest = make_manifest(tmp_path, [job(i, f"{STUBBORN_JOB} {tmp_path}/{i}.term")
                                        for i in ids], hosts=sim_hosts(("sim", 3)))
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        await run.wait_for(lambda: all(run.status(i) == "running" for i in ids))
        attempt_dirs = {i: Path(run.engine.jobs[i].history[-1].attempt_dir) for i in ids}
        # each script has installed its handler once it has printed (the wrapper's tee makes
        # the log: a job the engine calls running may have none yet)
        await run.wait_for(lambda: all(
            (d / "log").is_file() and "training" in (d / "log").read_text()
            for d in attempt_dirs.values()))
        answer = await run.engine.command("kill", [*ids, ids[0]])
        assert answer["ok"] and answer["results"] == {i: "ok" for i in ids}
    finally:
        await run.stop()
    termed = [float((tmp_path / f"{i}.term").read_text()) for i in ids]
    ended = [float((d / "end").read_text()) for d in attempt_dirs.values()]
    assert [(d / "exit").read_text().splitlines() for d in attempt_dirs.values()] == [
        ["137", "stop TERM", "signal KILL", "grace 5", "grace_ran_out 1"]] * 3
    assert max(termed) < min(ended), (termed, ended)
    # the state file keeps how each attempt ended, as its own exit record says
    assert [run.job(i)["history"][-1]["exit_code"] for i in ids] == [137] * 3
