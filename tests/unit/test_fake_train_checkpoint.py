"""fake-train's checkpoints, run as a process: a file per epoch, written whole; a run resumed
from epoch k gives every later epoch the numbers a run that never stopped gives, in every log
style; a corrupt checkpoint ends the resumed run at once, as torch.load failing would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE_TRAIN = ROOT / "eq_tui" / "sim" / "bin" / "fake-train"
STYLES = ("plain", "hf", "lightning", "keras2", "keras3", "torchtune", "timm", "nanogpt",
          "fairseq", "tqdm")
EPOCHS = 4


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "config.json").write_text("{}")
    env = {**os.environ, "EQ_SIM_STATE": str(state), "CUDA_VISIBLE_DEVICES": "0",
           "EQ_JOB_ID": "j", "EQ_ATTEMPT": "1"}
    return subprocess.run([sys.executable, str(FAKE_TRAIN), "--epoch-seconds", "0.02",
                           "--epochs", str(EPOCHS), "--metrics", "jsonl", *args],
                          env=env, cwd=tmp_path, capture_output=True, timeout=60, check=False)


def rows(folder: Path) -> list[dict[str, float]]:
    lines = (folder / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("style", STYLES)
def test_a_resumed_run_prints_the_numbers_of_one_that_never_stopped(
        tmp_path: Path, style: str) -> None:
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    straight.mkdir()
    resumed.mkdir()
    done = run(tmp_path, "--log-style", style, "--checkpoint-dir", str(straight / "ckpt"),
               "--metrics-dir", str(straight))
    assert done.returncode == 0, done.stderr
    ckpt = straight / "ckpt" / "epoch-2.pt"
    again = run(tmp_path, "--log-style", style, "--resume", str(ckpt),
                "--checkpoint-dir", str(resumed / "ckpt"), "--metrics-dir", str(resumed))
    assert again.returncode == 0, again.stderr
    assert f"resumed from {ckpt} at epoch 2" in again.stdout.decode()
    later = rows(resumed)
    assert [row["epoch"] for row in later] == [3.0, 4.0]
    assert later == rows(straight)[2:]
    for epoch in (3, 4):  # the resumed run's own checkpoints hold the same state
        name = f"epoch-{epoch}.pt"
        assert (resumed / "ckpt" / name).read_bytes() == (straight / "ckpt" / name).read_bytes()


def test_a_checkpoint_per_epoch_written_whole(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    done = run(tmp_path, "--checkpoint-dir", str(folder))
    assert done.returncode == 0, done.stderr
    # temp file then rename: no partial file is left behind under any name
    assert sorted(p.name for p in folder.iterdir()) == [f"epoch-{n}.pt"
                                                        for n in range(1, EPOCHS + 1)]
    for n in range(1, EPOCHS + 1):
        assert json.loads((folder / f"epoch-{n}.pt").read_text())["epoch"] == n


def test_a_corrupt_checkpoint_ends_the_resumed_run_at_once(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    assert run(tmp_path, "--checkpoint-dir", str(folder), "--corrupt-checkpoint", "2",
               "--metrics-dir", str(tmp_path)).returncode == 0
    (tmp_path / "results.jsonl").unlink()
    failed = run(tmp_path, "--resume", str(folder / "epoch-2.pt"), "--metrics-dir", str(tmp_path))
    assert failed.returncode == 1
    assert ("RuntimeError: PytorchStreamReader failed reading zip archive: failed finding "
            "central directory") in failed.stderr.decode()
    assert not (tmp_path / "results.jsonl").exists()  # not one epoch ran
    assert b"resumed from" not in failed.stdout


def records(tmp_path: Path) -> list[dict[str, object]]:
    lines = (tmp_path / "state" / "runs.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_an_oom_after_an_epoch_and_the_retry_resumed_as_the_host_records_them(
        tmp_path: Path) -> None:
    """--oom-after: the forced OOM comes at a training step once epoch N saved its checkpoint;
    the host's records say where each run began (from_epoch, resume), each epoch it finished
    and each checkpoint once its file was there."""
    folder = tmp_path / "ckpt"
    first = run(tmp_path, "--checkpoint-dir", str(folder), "--oom-attempts", "1",
                "--oom-after", "2")
    assert first.returncode == 1
    assert b"torch.OutOfMemoryError: CUDA out of memory" in first.stderr
    assert b"epoch 2/4" in first.stdout and b"epoch 3/4" not in first.stdout
    recs = records(tmp_path)
    assert [(r["event"], r.get("epoch"), r.get("during")) for r in recs] == [
        ("start", None, None), ("epoch", 1, None), ("checkpoint", 1, None), ("epoch", 2, None),
        ("checkpoint", 2, None), ("oom", None, "step"), ("end", None, None)]
    assert all(r["from_epoch"] == 1 and r["resume"] is None and r["epochs"] == EPOCHS
               for r in recs if r["event"] in ("start", "oom", "end"))
    assert recs[4]["path"] == str(folder / "epoch-2.pt") and recs[4]["pid"] == recs[0]["pid"]
    assert recs[4]["t"] >= recs[3]["t"]
    (tmp_path / "state" / "runs.jsonl").unlink()
    resumed = subprocess.run(  # attempt 2: past --oom-attempts, resumed from epoch 1
        [sys.executable, str(FAKE_TRAIN), "--epoch-seconds", "0.02", "--epochs", str(EPOCHS),
         "--checkpoint-dir", str(folder), "--oom-attempts", "1", "--oom-after", "2",
         "--resume", str(folder / "epoch-1.pt")],
        env={**os.environ, "EQ_SIM_STATE": str(tmp_path / "state"), "EQ_JOB_ID": "j",
             "CUDA_VISIBLE_DEVICES": "0", "EQ_ATTEMPT": "2"},
        cwd=tmp_path, capture_output=True, timeout=60, check=False)
    assert resumed.returncode == 0, resumed.stderr
    recs = records(tmp_path)
    assert [r["epoch"] for r in recs if r["event"] == "epoch"] == [2, 3, 4]
    assert [(r["from_epoch"], r["resume"]) for r in recs if r["event"] in ("start", "end")] \
        == [(2, str(folder / "epoch-1.pt"))] * 2
    # a file that is no checkpoint: the run says it could not begin anywhere
    (folder / "bad.pt").write_text("PK")
    assert run(tmp_path, "--resume", str(folder / "bad.pt")).returncode == 1
    assert records(tmp_path)[-1]["from_epoch"] is None


def test_a_run_without_checkpoints_records_no_starting_epoch(tmp_path: Path) -> None:
    assert run(tmp_path).returncode == 0
    assert not any("from_epoch" in r for r in records(tmp_path))
