"""Early stopping on each training stack's own output: fake-train prints the same runs as
HF Trainer, Lightning, Keras 2 and 3, torchtune, timm, nanoGPT, fairseq and tqdm do
(`--log-style`, written from the fixtures in tests/fixtures/stacks/), on real sessions on the
simulator. With only the keys the README documents (`goal`, `early_stop`), an asha and a median
sweep of each stack stop the diverging configurations (`--nan-after 1`: the loss nan from the
second epoch, the accuracy at chance) and keep the best one, proved from the hosts' own exit
records (ground_truth.py), not the engine's state."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from eq_tui.hosts.factory import sim_state_dir
from eq_tui.manifest.model import EarlyStopSpec, Goal, PhaseSpec, ResultsSpec
from eq_tui.results.records import read_records
from tests.support.engine_run import job, make_manifest, run_to_end, sim_hosts
from tests.support.ground_truth import exits

pytestmark = pytest.mark.asyncio

# each stack's evaluation metric as it names it, and which way is better
METRIC: dict[str, tuple[str, Goal]] = {
    "hf": ("eval_accuracy", "max"),
    "lightning": ("val_acc", "max"),
    "keras2": ("val_accuracy", "max"),
    "keras3": ("val_loss", "min"),
    "torchtune": ("loss", "min"),
    "timm": ("Acc@1", "max"),
    "nanogpt": ("val_loss", "min"),
    "fairseq": ("valid_loss", "min"),
    "tqdm": ("acc", "max"),
}
HEALTHY = ("0.003", "0.03", "0.3")  # fake-train's quality peaks at lr 0.03
DIVERGING = ("1", "3")
EPOCHS = 4


def stack_sweep(style: str) -> list:  # type: ignore[type-arg]
    jobs = []
    for lr in (*HEALTHY, *DIVERGING):
        # a diverging run goes on for longer than the healthy ones: a prune decided at its
        # second or third report always finds it running, however loaded the machine
        diverge = f" --nan-after 1 --epochs {3 * EPOCHS}" if lr in DIVERGING \
            else f" --epochs {EPOCHS}"
        jobs.append(job(f"lr{lr}", f"fake-train --log-style {style} --lr {lr} --seed 1 "
                                   f"--epoch-seconds 0.4 --mem 1000{diverge}",
                        params=(("lr", lr),)))
    return jobs


@pytest.mark.parametrize("rule", ["asha", "median"])
@pytest.mark.parametrize("style", sorted(METRIC))
async def test_each_stack_prunes_the_diverging_and_keeps_the_best(
        tmp_path: Path, style: str, rule: str) -> None:
    metric, goal = METRIC[style]
    spec = EarlyStopSpec(metric=metric, goal=goal, rule=rule)  # type: ignore[arg-type]
    phases = (PhaseSpec(name="main", results=ResultsSpec(goal=((metric, goal),),
                                                         early_stop=spec)),)
    manifest = make_manifest(tmp_path, stack_sweep(style), hosts=sim_hosts(("sim", 5)),
                             phases=phases)
    run_dir = tmp_path / "run"
    code, run = await run_to_end(manifest, run_dir, timeout=120)
    statuses = {j.id: str(j.status) for j in run.engine.jobs.values()}
    reports = {j.id: j.reports for j in run.engine.jobs.values()}
    assert statuses["lr0.03"] == "completed", (statuses, reports)
    for lr in DIVERGING:
        assert statuses[f"lr{lr}"] == "pruned", (statuses, reports)
    assert code == 0, statuses
    # ground truth: the hosts' exit records. The best ran to its end (exit 0); a pruned job
    # was stopped by a signal before its last epoch
    recorded = exits([sim_state_dir(run_dir, "sim")])
    assert recorded["lr0.03"] == [0]
    for lr in DIVERGING:
        assert recorded[f"lr{lr}"] and recorded[f"lr{lr}"][0] != 0, recorded
    # the reports are evaluations, never a redraw's repeat: the best job's results series
    # (its whole log, read once it ended) has one point per epoch for an epoch-level metric,
    # and early stopping (which reads the log while the job runs, and its last lines from the
    # probe that found it ended) counted exactly those, however few looks the job got
    best = run.engine.jobs["lr0.03"]
    per_epoch = {"torchtune": 4}.get(style, 1)  # torchtune logs its loss per logged step
    record = next(r for r in read_records(run_dir) or [] if r["id"] == "lr0.03")
    assert len(record["series"][metric]) == EPOCHS * per_epoch, (style, record["series"])
    assert len(best.reports) == EPOCHS * per_epoch, (style, best.reports)
    # a diverged job's nan was read as nan (never its last finite value), where it lived to
    # report it: a job that was losing before it diverged is pruned at its first report
    for lr in DIVERGING:
        made = run.engine.jobs[f"lr{lr}"].reports
        assert made, (style, reports)
        if len(made) > per_epoch and goal == "min":  # it reported past its first epoch
            assert math.isnan(made[-1]), (style, made)
