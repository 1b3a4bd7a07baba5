"""Preemption by priority (issue 44 item 3): a real engine on a simulated host with one GPU
(real screen sessions), fake-train saving a checkpoint an epoch. What ran is read from the
host's own records (fake-train's epoch records, runs.jsonl), never the engine's state.

- a checkpointed low-priority job holds the GPU; a `preempt: true` job of higher priority
  becomes ready (its precondition file appears): the low job is stopped with its contract's
  signal, the high one starts within the grace plus a tick, and the low one resumes from its
  checkpoint afterwards and completes, at most one epoch run twice;
- a job without a contract holds the GPU: a second preemptor says why it does not stop it and
  waits; the job runs on, once;
- a victim that ignores its signal has its whole grace: meanwhile the engine ticks on (the
  stop runs beside the ticks, tick/stops.py): a job on the other GPU ends, is judged, and the
  next one starts there before the grace is over, while the victim's GPU is kept for the
  preemptor;
- the engine dies during a grace (its state files as they were then): the next engine finds
  the stop on disk and requeues the victim — not failed, not counted twice, started once
  more only after it was gone."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from eq_tui.api.events import JobPreempted, JobUpdated
from eq_tui.manifest.model import CheckpointSpec, JobSpec, Precondition
from tests.support.engine_run import EngineRun, job, make_manifest, sim_hosts, start_engine

pytestmark = pytest.mark.integration
EPOCHS = 12
GRACE_S = 2.0
TRAIN = "fake-train --epoch-seconds 0.25 --mem 1000 --seed 3"


def start(run: EngineRun, job_id: str, attempt: int = 1) -> dict[str, object]:
    """fake-train's own `start` record of that attempt."""
    found = [r for r in run.runs() if r.get("event") == "start" and r.get("job") == job_id
             and r.get("attempt") == attempt]
    assert found, f"{job_id}'s attempt {attempt} never started"
    return found[0]


def gated(job_id: str, cmd: str, gate: Path, **kwargs: object) -> JobSpec:
    return job(job_id, cmd, preconditions=(Precondition("checkpoint_exists", str(gate)),),
               **kwargs)


def started(run: EngineRun, job_id: str) -> list[int]:
    return sorted(int(r["attempt"]) for r in run.runs()
                  if r.get("event") == "start" and r.get("job") == job_id)


async def test_a_preempt_job_stops_a_checkpointed_one_and_never_a_bare_one(
        tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    contract = CheckpointSpec(path="ckpt/low/epoch-*.pt", resume="--resume {checkpoint}",
                              grace=GRACE_S)
    low = replace(job("low", f"{TRAIN} --epochs {EPOCHS} --checkpoint-dir ckpt/low"),
                  checkpoint=contract)
    jobs = [low,
            gated("high", "fake-train --epochs 2 --epoch-seconds 0.25 --mem 1000",
                  work / "go-high", priority=5, preempt=True),
            gated("bare", f"{TRAIN} --epochs 8", work / "go-bare"),
            gated("high2", "fake-train --epochs 1 --epoch-seconds 0.25 --mem 1000",
                  work / "go-high2", priority=5, preempt=True)]
    manifest = make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 1)), cwd=str(work))
    run = await start_engine(manifest, tmp_path / "run", poll=0.3)
    try:
        await run.wait_for(lambda: max(run.epochs_run("low").get(1, [0])) >= 3, timeout=60)
        (work / "go-high").touch()
        await run.wait_for(lambda: started(run, "high") == [1], timeout=30)
        preempted = [e for e in run.events if isinstance(e, JobPreempted)]
        assert [(e.job, e.by, e.host, e.gpus) for e in preempted] == [("low", "high", "sim",
                                                                        (0,))]
        # the waiting job's row said why while the low one stopped; the low one's says by whom
        assert any(isinstance(e, JobUpdated) and e.job == "high" and (e.state.get("reason") or "")
                   .startswith("preempting low on sim:0") for e in run.events)
        assert any(isinstance(e, JobUpdated) and e.job == "low" and "preempted by high (1 of 3)"
                   in (e.state.get("reason") or "") for e in run.events)
        # from the decision to the start on the host (its own record): the grace and a tick
        began = next(r["t"] for r in run.runs() if r.get("event") == "start"
                     and r.get("job") == "high")
        assert began - preempted[0].at <= GRACE_S + 3.0
        await run.wait_for(lambda: run.status("low") == "completed", timeout=60)
        history = run.engine.jobs["low"].history
        assert [a.preempted_by for a in history] == ["high", None]
        # the job without a contract: the second preemptor waits, saying why
        (work / "go-bare").touch()
        await run.wait_for(lambda: run.status("bare") == "running", timeout=30)
        (work / "go-high2").touch()
        await run.wait_for(lambda: "no running job of lower priority has a checkpoint "
                           "contract" in (run.engine.jobs["high2"].reason or ""), timeout=30)
        assert run.status("bare") == "running"
        await run.wait_for(lambda: run.status("high2") == "completed", timeout=60)
    finally:
        await run.stop()
    runs = run.epochs_run("low")
    first, second = runs[1], runs[2]
    # resumed from the newest checkpoint: at most the epoch under way ran twice, none skipped
    assert second[0] in (first[-1], first[-1] + 1), runs
    assert second[-1] == EPOCHS and set(first) | set(second) == set(range(1, EPOCHS + 1))
    assert started(run, "bare") == [1] and started(run, "high") == [1]
    # the GPU the low job freed went to the preemptor: the low job's next attempt began
    # only once the high one had ended (the host's records)
    ends = {r["job"]: r["t"] for r in run.runs() if r.get("event") == "end"}
    again = next(r["t"] for r in run.runs() if r.get("event") == "start"
                 and r.get("job") == "low" and r.get("attempt") == 2)
    assert again >= ends["high"]
    assert not [e for e in run.events if isinstance(e, JobPreempted) and e.job == "bare"]


LONG_GRACE_S = 6.0


async def test_the_engine_ticks_on_while_a_victim_has_its_grace(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    contract = CheckpointSpec(path="ckpt/slow/epoch-*.pt", resume="--resume {checkpoint}",
                              signal="USR1", grace=LONG_GRACE_S)
    # it ignores its checkpoint's signal: only the SIGKILL at the end of its grace stops it
    slow = replace(job("slow", f"trap '' USR1; exec {TRAIN} --epochs 40 "
                               "--checkpoint-dir ckpt/slow"), checkpoint=contract)
    jobs = [slow, job("short", "fake-train --epochs 3 --epoch-seconds 1 --mem 1000",
                      priority=1),
            job("next", "fake-train --epochs 10 --epoch-seconds 1 --mem 1000"),
            gated("urgent", "fake-train --epochs 1 --epoch-seconds 0.25 --mem 1000",
                  work / "go", priority=5, preempt=True)]
    manifest = make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 2)), cwd=str(work))
    run = await start_engine(manifest, tmp_path / "run", poll=0.3)
    try:
        await run.wait_for(lambda: bool(run.epochs_run("slow")) and started(run, "short")
                           == [1], timeout=30)
        (work / "go").touch()
        await run.wait_for(lambda: started(run, "slow") == [1, 2], timeout=40)
    finally:
        await run.stop()
    preempted = next(e for e in run.events if isinstance(e, JobPreempted))
    assert (preempted.job, preempted.by) == ("slow", "urgent")
    # when the victim ended, by its wrapper's exit record on the host: its whole grace
    stopped = run.engine.jobs["slow"].history[0]
    gone = (Path(stopped.attempt_dir) / "exit").stat().st_mtime
    assert gone - preempted.at >= LONG_GRACE_S - 0.5
    # meanwhile the other GPU's job ended, was judged, and the next job started on its GPU:
    # a stop that holds the engine for the grace starts it only after the victim is gone
    short_end = next(float(str(r["t"])) for r in run.runs() if r.get("event") == "end"
                     and r.get("job") == "short")
    assert preempted.at < short_end < float(str(start(run, "next")["t"])) < gone
    assert start(run, "next")["gpu"] == start(run, "short")["gpu"] != start(run, "slow")["gpu"]
    # the victim's GPU was kept for the preemptor, which started there once it was gone
    urgent = start(run, "urgent")
    assert float(str(urgent["t"])) >= gone and urgent["gpu"] == start(run, "slow")["gpu"]
    assert [a.preempted_by for a in run.engine.jobs["slow"].history] == ["urgent", None]


async def test_an_engine_killed_during_a_grace_leaves_the_stop_to_the_next(
        tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    contract = CheckpointSpec(path="ckpt/slow/epoch-*.pt", resume="--resume {checkpoint}",
                              signal="USR1", grace=GRACE_S)
    slow = replace(job("slow", f"trap '' USR1; exec {TRAIN} --epochs {EPOCHS} "
                               "--checkpoint-dir ckpt/slow"), checkpoint=contract)
    jobs = [slow, gated("urgent", "fake-train --epochs 1 --epoch-seconds 0.25 --mem 1000",
                        work / "go", priority=5, preempt=True)]
    manifest = make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 1)), cwd=str(work))
    run_dir, saved = tmp_path / "run", tmp_path / "saved"
    run = await start_engine(manifest, run_dir, poll=0.3)
    try:
        await run.wait_for(lambda: bool(run.epochs_run("slow")), timeout=30)
        (work / "go").touch()
        await run.wait_for(lambda: any(isinstance(e, JobPreempted) for e in run.events))
        # the state files as a SIGKILL of the engine would leave them, in the grace
        shutil.copytree(run_dir, saved, ignore=shutil.ignore_patterns("*.lock", "*.sock"))
    finally:
        await run.stop()  # its shutdown finishes the stop: the victim is gone
    for name in ("queue_state.json", "queue_state.journal.jsonl"):
        (run_dir / name).unlink(missing_ok=True)
        if (saved / name).exists():
            shutil.copy(saved / name, run_dir / name)
    marked = next(j for j in run.state["jobs"] if j["id"] == "slow")["history"][0]
    assert (marked["failure_class"], marked["preempted_by"], marked["end"]) == (
        "requeued", "urgent", None)
    again = await start_engine(manifest, run_dir, poll=0.3)
    try:
        await again.wait_for(lambda: again.status("slow") == "completed", timeout=60)
    finally:
        await again.stop()
    job_state = again.engine.jobs["slow"]
    assert [(a.preempted_by, a.failure_class) for a in job_state.history] == [
        ("urgent", "requeued"), (None, None)]
    assert job_state.retries_by_class == {}
    assert job_state.retry_base == 1  # the preempted launch spent no retry of its budget
    assert started(again, "slow") == [1, 2] and started(again, "urgent") == [1]
    gone = (Path(job_state.history[0].attempt_dir) / "exit").stat().st_mtime
    assert float(str(start(again, "urgent")["t"])) >= gone
