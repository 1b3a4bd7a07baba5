"""Every restart resumes from the job's newest checkpoint (issue 44): a real engine on a
simulated host (real screen sessions), fake-train saving a checkpoint an epoch
(`--checkpoint-dir`), the job's `checkpoint:` contract, and the verbs from the shell in their own
process. What ran is read from the host: fake-train's own epoch records (runs.jsonl) and each
attempt's `cmd` file, never the engine's state; the final numbers against a run that never
stopped."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from eq_tui.manifest.model import CheckpointSpec, JobSpec
from eq_tui.results.records import read_records
from tests.support.engine_run import EngineRun, job, make_manifest, start_engine
from tests.support.shell_verb import eq

pytestmark = pytest.mark.integration
CONTRACT = CheckpointSpec(path="ckpt/${id}/epoch-*.pt", resume="--resume {checkpoint}")
EPOCHS = 20
JSONL = " --metrics jsonl"  # a row an epoch, with its position: results.jsonl


def checkpointed(job_id: str, extra: str = "") -> JobSpec:
    spec = job(job_id, f"fake-train --epochs {EPOCHS} --epoch-seconds 0.25 --mem 1000 --seed 3 "
                       f"--checkpoint-dir ckpt/{job_id}{extra}")
    return replace(spec, checkpoint=replace(CONTRACT, path=f"ckpt/{job_id}/epoch-*.pt"))


def launched_cmds(run: EngineRun, job_id: str) -> list[str]:
    return [Path(a.attempt_dir, "cmd").read_text().rstrip("\n")
            for a in run.engine.jobs[job_id].history if Path(a.attempt_dir, "cmd").exists()]


async def straight_run(tmp_path: Path, job_id: str, extra: str = "") -> float:
    """The final val_acc of the same job run once, never stopped."""
    manifest = make_manifest(tmp_path / "straight", [checkpointed(job_id, extra)],
                             cwd=str(tmp_path / "straight"))
    run = await start_engine(manifest, tmp_path / "straight" / "run")
    await run.wait_for(lambda: run.status(job_id) == "completed", timeout=120)
    await run.stop()
    return float(run.engine.jobs[job_id].metrics["val_acc"] or 0)


async def test_a_requeue_from_the_shell_resumes_from_the_newest_checkpoint(
        tmp_path: Path) -> None:
    (tmp_path / "straight").mkdir()
    expected = await straight_run(tmp_path, "lr3", JSONL)
    work = tmp_path / "work"
    work.mkdir()
    manifest = make_manifest(tmp_path, [checkpointed("lr3", JSONL)], cwd=str(work))
    run = await start_engine(manifest, tmp_path / "run")
    try:
        await run.wait_for(lambda: max(run.epochs_run("lr3").get(1, [0])) >= 8, timeout=60)
        code, out, err = await eq("requeue", str(run.run_dir), "lr3")
        assert code == 0, (out, err)
        await run.wait_for(lambda: run.status("lr3") == "completed", timeout=120)
    finally:
        await run.stop()
    job_state = run.engine.jobs["lr3"]
    runs = run.epochs_run("lr3")
    assert sorted(runs) == [1, 2], runs
    first, second = runs[1], runs[2]
    # the second attempt went on from the newest checkpoint the first saved: at most one epoch
    # (the one under way when it was stopped) ran twice, none was skipped
    assert second[0] == first[-1] + 1 or second[0] == first[-1], runs
    assert second[-1] == EPOCHS and set(first) | set(second) == set(range(1, EPOCHS + 1))
    assert len(set(first) & set(second)) <= 1
    resumed = f"ckpt/lr3/epoch-{second[0] - 1}.pt"
    # the host ran the command with the contract's arguments, quoted; the attempt says so
    cmds = launched_cmds(run, "lr3")
    assert not cmds[0].endswith(".pt") and cmds[1].endswith(f" --resume {resumed}"), cmds
    assert [a.resumed_from for a in job_state.history] == [None, resumed]
    assert any(f"lr3: attempt 2 resumes from {resumed}" in getattr(e, "message", "")
               for e in run.events)
    # the same numbers as a run that never stopped
    record = next(r for r in read_records(run.run_dir) or [] if r["id"] == "lr3")
    assert record["metrics"]["val_acc"] == pytest.approx(expected)
    # and its series goes on from where the first attempt's stopped: each epoch once, though
    # the second attempt wrote only the epochs it ran (its own results.jsonl)
    assert record["series"]["epoch"] == list(range(1, EPOCHS + 1)), record["series"]
    assert len(record["series"]["val_acc"]) == EPOCHS
    code, out, _ = await eq("status", str(run.run_dir), "--jobs", "--json")
    assert code == 0
    [row] = json.loads(out)
    assert row["resumed_from"] == resumed and f"resumed from {resumed}" in row["reason"]


async def test_a_corrupt_newest_checkpoint_falls_back_to_the_one_before_it(
        tmp_path: Path) -> None:
    """Epoch 5's save was cut short, and the first attempt hangs after it: requeued, the resume
    from epoch 5's fails before any progress and is told; the next attempt resumes from epoch
    4's, and the job ends with the numbers of a run that never stopped."""
    (tmp_path / "straight").mkdir()
    expected = await straight_run(tmp_path, "c")
    work = tmp_path / "work"
    work.mkdir()
    spec = checkpointed("c", " --corrupt-checkpoint 5 --hang-after 5 --hang-attempts 1")
    run = await start_engine(make_manifest(tmp_path, [spec], cwd=str(work)), tmp_path / "run")
    try:
        await run.wait_for(lambda: any(r.get("event") == "hang" for r in run.runs()),
                           timeout=60)
        code, out, err = await eq("requeue", str(run.run_dir), "c")
        assert code == 0, (out, err)
        await run.wait_for(lambda: run.status("c") == "completed", timeout=120)
    finally:
        await run.stop()
    state = run.engine.jobs["c"]
    assert [a.resumed_from for a in state.history] == [None, "ckpt/c/epoch-5.pt",
                                                       "ckpt/c/epoch-4.pt"]
    assert state.history[1].failure_class == "resume_failed"
    assert state.failed_checkpoints == ["ckpt/c/epoch-5.pt"]
    assert any("the resume from ckpt/c/epoch-5.pt failed before any progress"
               in getattr(e, "message", "") for e in run.events)
    runs = run.epochs_run("c")
    assert runs[1] == [1, 2, 3, 4, 5] and 2 not in runs and runs[3][0] == 5, runs
    record = next(r for r in read_records(run.run_dir) or [] if r["id"] == "c")
    assert record["metrics"]["val_acc"] == pytest.approx(expected)


async def test_a_restart_with_no_checkpoint_starts_from_scratch_and_says_so_once(
        tmp_path: Path) -> None:
    """The contract's path matches nothing (the job saves elsewhere): each restart starts from
    scratch, as written, and the log says so once."""
    work = tmp_path / "work"
    work.mkdir()
    spec = replace(checkpointed("n"), checkpoint=replace(CONTRACT, path="elsewhere/*.pt"))
    run = await start_engine(make_manifest(tmp_path, [spec], cwd=str(work)), tmp_path / "run")
    try:
        for attempt in (1, 2):
            await run.wait_for(lambda a=attempt: max(run.epochs_run("n").get(a, [0])) >= 2,
                               timeout=60)
            code, out, err = await eq("requeue", str(run.run_dir), "n")
            assert code == 0, (out, err)
        await run.wait_for(lambda: 3 in run.epochs_run("n"), timeout=60)
    finally:
        await run.stop()
    runs = run.epochs_run("n")
    assert [runs[a][0] for a in (1, 2, 3)] == [1, 1, 1]
    assert not any("--resume" in cmd for cmd in launched_cmds(run, "n"))
    told = [e for e in run.events if "no checkpoint matches 'elsewhere/*.pt'"
            in getattr(e, "message", "")]
    assert len(told) == 1 and "attempt 2 starts from scratch" in told[0].message
