"""The chaos run's final-metric check: a restarted job's final loss against what a run of its
command that never stopped writes (fake-train, run at full speed, its faults left out)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.chaos.checkpoints import checkpoint_files, final_metric_mismatches, uninterrupted_loss

CMD = ("fake-train --epochs 3 --epoch-seconds 0.3 --mem 3000 --oom-attempts 1 "
       "--output out/${JOB_ID}.json --checkpoint-dir ckpt/${JOB_ID} --seed 5 --oom-after 1")


def test_a_final_loss_unlike_an_uninterrupted_runs_is_flagged(tmp_path: Path) -> None:
    want = uninterrupted_loss(CMD, "j")
    assert want is not None
    # its numbers depend on the job and its seed, not on its pace or faults
    assert uninterrupted_loss(CMD.replace("--seed 5", "--seed 6"), "j") != want
    assert uninterrupted_loss(CMD, "k") != want
    assert uninterrupted_loss(CMD.replace(" --oom-attempts 1", "").replace("0.3", "0.1"),
                              "j") == want
    (tmp_path / "out").mkdir()
    jobs = {"j": CMD, "k": CMD}
    (tmp_path / "out" / "j.json").write_text(json.dumps({"final_loss": want}))
    (tmp_path / "out" / "k.json").write_text(json.dumps({"final_loss": want}))  # j's loss
    assert final_metric_mismatches(jobs, ["j"], tmp_path) == (1, [])
    checked, found = final_metric_mismatches(jobs, ["j", "k", "gone"], tmp_path)
    assert checked == 2 and len(found) == 1 and found[0].startswith("k: final loss")
    (tmp_path / "out" / "j.json").write_text(json.dumps({"final_loss": want + 1e-6}))
    assert final_metric_mismatches(jobs, ["j"], tmp_path)[1] != []


def test_the_checkpoint_files_with_their_mtimes(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt" / "job003"
    folder.mkdir(parents=True)
    for name in ("epoch-1.pt", "epoch-12.pt", ".epoch-13.pt.tmp", "epoch-x.pt"):
        (folder / name).write_text("{}")
    os.utime(folder / "epoch-12.pt", (100.0, 100.0))
    found = checkpoint_files(tmp_path)
    assert set(found) == {("job003", 1), ("job003", 12)} and found[("job003", 12)] == 100.0
