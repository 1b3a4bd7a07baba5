"""A resumed attempt's series continue the attempts before it (eq_tui/results/resumed.py):
each epoch once, in order, the same series as a run that never stopped; on fake-train's real
log and results.jsonl, and on hand-made series for the edges."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

from eq_tui.results.parse import parse_jsonl, parse_log
from eq_tui.results.records import make_record
from eq_tui.results.resumed import continued

FAKE_TRAIN = Path(__file__).resolve().parents[2] / "eq_tui" / "sim" / "bin" / "fake-train"


def fake_train(tmp_path: Path, attempt: int, *args: str) -> str:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "config.json").write_text("{}")
    folder = tmp_path / f"a{attempt}"
    folder.mkdir()
    env = {**os.environ, "EQ_SIM_STATE": str(state), "CUDA_VISIBLE_DEVICES": "0",
           "EQ_JOB_ID": "j", "EQ_ATTEMPT": str(attempt), "EQ_ATTEMPT_DIR": str(folder)}
    done = subprocess.run([sys.executable, str(FAKE_TRAIN), "--epochs", "5", "--epoch-seconds",
                           "0", "--metrics", "jsonl", "--checkpoint-dir", str(tmp_path / "ck"),
                           *args], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    return done.stdout


def test_the_series_of_a_resumed_attempt_continue_the_first_as_a_straight_run_has_them(
        tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    straight = fake_train(tmp_path / "s", 9)
    first = fake_train(tmp_path, 1, "--oom-attempts", "1", "--oom-after", "3")
    # resumed from epoch 2's checkpoint, not 3's: epoch 3 runs again
    second = fake_train(tmp_path, 2, "--resume", str(tmp_path / "ck" / "epoch-2.pt"))
    want = parse_log(straight.splitlines())
    assert len(want["loss"]) == 5
    # the log has no position: all of the first attempt's stays (a resume from the newest
    # checkpoint goes on right after it), so the epoch it ran again is there twice
    logged = continued(parse_log(first.splitlines()), parse_log(second.splitlines()))
    assert logged["val_acc"][:3] == want["val_acc"][:3] and len(logged["val_acc"]) == 6
    # results.jsonl rows carry the epoch: each epoch once, the straight run's numbers
    rows = [(tmp_path / f"a{n}" / "results.jsonl").read_text() for n in (1, 2)]
    resumed = continued(parse_jsonl(rows[0]), parse_jsonl(rows[1]))
    assert resumed == parse_jsonl((tmp_path / "s" / "a9" / "results.jsonl").read_text())
    assert resumed["epoch"] == [1.0, 2.0, 3.0, 4.0, 5.0]
    # through a record and back: what the job's next resumed attempt carries
    record = make_record(job_id="j", phase="main", params={}, attempt=2, status="completed",
                         metrics=resumed)
    assert continued(record["series"], {})["val_acc"] == resumed["val_acc"]


def test_carried_points_at_or_past_the_resumed_position_go() -> None:
    carried = {"epoch": [1.0, 2.0, 3.0], "loss": [0.9, 0.5, 0.4], "lr": [0.1, 0.08, 0.06, 0.04]}
    own = {"epoch": [3.0, 4.0], "loss": [0.41, 0.3]}
    out = continued(carried, own)
    assert out["epoch"] == [1.0, 2.0, 3.0, 4.0] and out["loss"] == [0.9, 0.5, 0.41, 0.3]
    assert out["lr"] == [0.1, 0.08, 0.06, 0.04]  # not one point per position: all stay
    # resumed past every carried position: all stay
    assert continued(carried, {"epoch": [7.0], "loss": [0.2]})["loss"] == [0.9, 0.5, 0.4, 0.2]
    assert continued(carried, {"epoch": [1.0], "loss": [0.8]})["loss"] == [0.8]
    # a position only one side has, or a first position that is no number: all stay
    assert continued({"loss": [0.9]}, own)["loss"] == [0.9, 0.41, 0.3]
    assert continued(carried, {"epoch": [math.nan], "loss": [0.1]})["loss"] == \
        [0.9, 0.5, 0.4, 0.1]
    assert continued(carried, {"loss": [0.1]})["loss"] == [0.9, 0.5, 0.4, 0.1]


def test_a_step_position_and_the_records_nulls() -> None:
    out = continued({"step": [100.0, 200.0], "acc": [None, 0.5]},
                    {"step": [200.0], "acc": [0.6], "new": [1.0]})
    assert out["step"] == [100.0, 200.0] and math.isnan(out["acc"][0])
    assert out["acc"][1:] == [0.6] and out["new"] == [1.0]
    assert continued({}, {"loss": [0.3]}) == {"loss": [0.3]}
    assert continued({"loss": [0.3]}, {}) == {"loss": [0.3]}
