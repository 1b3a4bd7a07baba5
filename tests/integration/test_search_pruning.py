"""A search with `early_stop: {rule: median}` on simulated GPUs (real screen sessions): each
trial runs two seeds side by side, their reports go to Optuna as the trial's intermediate values
(the mean over the two seeds at each report), and Optuna's MedianPruner prunes the clearly bad
trial (lr 3: fake-train's val_acc climbs far slower than at lr 0.03). Read back as Optuna's own
tools read it (optuna.load_study), and from what the jobs themselves wrote on the host."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from eq_tui.api.events import JobPruned
from eq_tui.manifest.loader import load_manifest
from tests.support.engine_run import run_to_end

pytestmark = pytest.mark.asyncio

EPOCHS = 4
# RandomSampler(seed=11) asks lr 0.03, then 3: the bad trial starts once the good one has
# ended, so the median pruner has its reports to compare with (two trials alike would be no
# test: Optuna's median of one completed trial prunes the one of them a little behind)
MANIFEST = f"""\
project: prunebed
hosts: [{{name: sim, simulate: {{gpus: 2}}}}]
goal: {{val_acc: max}}
early_stop: {{metric: val_acc, rule: median}}
search:
  space: {{lr: ["0.03", "3"]}}
  trials: 2
  sampler: random
  seed: 11
grid: {{seed: [1, 2]}}
template:
  cmd: "fake-train --epochs {EPOCHS} --epoch-seconds 0.4 --mem 2000 --lr ${{lr}} --seed ${{seed}}
    --metrics jsonl"
"""


def written(attempt_dir: str) -> list[float]:
    """The val_acc of each epoch the job itself wrote on the host."""
    lines = (Path(attempt_dir) / "results.jsonl").read_text().splitlines()
    return [json.loads(line)["val_acc"] for line in lines if line.strip()]


async def test_optuna_prunes_the_bad_trial_from_the_mean_of_its_seeds(tmp_path: Path) -> None:
    path = tmp_path / "search.yaml"
    path.write_text(MANIFEST)
    run_dir = tmp_path / "run"
    code, run = await run_to_end(load_manifest(path), run_dir, timeout=60)
    assert code == 0
    study = optuna.load_study(study_name="main", storage=JournalStorage(
        JournalFileBackend(str(run_dir / "optuna.journal"))))
    trials = {t.number: t for t in study.trials}
    assert [(n, t.params["lr"], t.state.name) for n, t in sorted(trials.items())] == [
        (0, "0.03", "COMPLETE"), (1, "3", "PRUNED")]
    state = json.loads((run_dir / "queue_state.json").read_text())
    jobs = {job["id"]: job for job in state["jobs"]}
    for number, trial in trials.items():
        seeds = [written(jobs[f"t{number}_seed{s}"]["history"][-1]["attempt_dir"])
                 for s in (1, 2)]
        told = trial.intermediate_values
        # each step told is the mean of the two seeds' values at that report (the log prints
        # 4 decimals), and only steps both seeds made
        assert told and sorted(told) == list(range(1, len(told) + 1)), told
        assert len(told) <= min(len(s) for s in seeds)
        for step, value in told.items():
            assert value == pytest.approx(statistics.fmean(s[step - 1] for s in seeds),
                                          abs=1e-4)
        if trial.state.name == "COMPLETE":
            assert len(told) == EPOCHS  # the last reports, read as the jobs ended, too
    # the bad trial's jobs stopped early, by their own record, pruned with a reason and an event
    bad = [f"t1_seed{s}" for s in (1, 2)]
    for key in bad:
        assert jobs[key]["status"] == "pruned"
        assert jobs[key]["reason"].startswith("pruned at report ")
        assert "Optuna's MedianPruner" in jobs[key]["reason"]
        assert len(written(jobs[key]["history"][-1]["attempt_dir"])) < EPOCHS
    assert sorted(e.job for e in run.events if isinstance(e, JobPruned)) == bad
    assert trials[1].user_attrs["eq_tui_pruned_at"] == max(trials[1].intermediate_values)
    # the journal's own log: no step of any trial was told twice
    ops = [json.loads(line) for line in (run_dir / "optuna.journal").read_text().splitlines()]
    told_ops = Counter((op["trial_id"], op["step"]) for op in ops if op["op_code"] == 7)
    assert told_ops and set(told_ops.values()) == {1}, told_ops
