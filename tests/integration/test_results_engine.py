"""Results on real sessions: jobs on sim hosts (real screen sessions) write their metrics in each
supported shape; the engine reads them once at the end over the host's connection, sets them on
the job, writes results.jsonl, ends summary.md with the results table and runs on_complete."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from eq_tui.manifest.model import MetricsSpec, PhaseSpec, ResultsSpec
from eq_tui.results.records import read_records
from tests.support.engine_run import job, make_manifest, run_to_end, sim_hosts

TRAIN = "fake-train --epochs 3 --epoch-seconds 0.05 --mem 1000"


def records_by_id(run_dir: Path) -> dict[str, dict]:
    records = read_records(run_dir)
    assert records is not None
    return {r["id"]: r for r in records}


@pytest.mark.asyncio
async def test_every_shape_and_auto_discovery_on_real_sessions(tmp_path: Path) -> None:
    out = "${RUN_DIR}/out/${JOB_ID}"
    jobs = [
        # no `metrics:`: the conventional files in the attempt dir, and the log
        job("auto_json", f"{TRAIN} --metrics json --lr 0.03"),
        job("auto_jsonl", f"{TRAIN} --metrics jsonl --lr 0.1"),
        job("auto_csv", f"{TRAIN} --metrics csv --lr 0.01"),
        job("auto_wandb", f"{TRAIN} --metrics wandb --lr 0.03"),
        job("auto_log", f"{TRAIN} --lr 0.03"),
        # `metrics:` naming files (launch-time variables; a path relative to the cwd)
        job("named_json", f"mkdir -p {out} && {TRAIN} --metrics json --metrics-dir {out}",
            metrics=MetricsSpec(json=f"{out}/metrics.json")),
        job("named_csv", f"mkdir -p rel/${{JOB_ID}} && {TRAIN} --metrics csv "
                         "--metrics-dir rel/${JOB_ID}",
            metrics=MetricsSpec(csv="rel/${JOB_ID}/metrics.csv")),
        job("named_jsonl", f"{TRAIN} --metrics jsonl --metrics-dir .",
            metrics=MetricsSpec(jsonl="results.jsonl")),
        job("pattern", f"{TRAIN} --lr 0.03",
            metrics=MetricsSpec(pattern=r"val_acc=(?P<accuracy>[0-9.]+)")),
        job("log_only", f"{TRAIN} --metrics json", metrics=MetricsSpec(log=True)),
    ]
    # named_jsonl writes into the shared cwd: give it one of its own
    workdir = tmp_path / "work"
    workdir.mkdir()
    manifest = make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 4)), cwd=str(workdir))
    code, run = await run_to_end(manifest, tmp_path / "run", timeout=90)
    assert code == 0
    records = records_by_id(tmp_path / "run")
    assert set(records) == {j.id for j in jobs}
    for job_id in ("auto_json", "auto_wandb", "named_json"):
        assert set(records[job_id]["metrics"]) >= {"val_acc", "loss"}, records[job_id]
    assert "test.acc" in records["auto_json"]["metrics"]  # a nested leaf, dotted
    assert "test.acc" in records["named_json"]["metrics"]
    assert records["auto_json"]["sources"][0].endswith("/metrics.json")
    assert "_step" not in records["auto_wandb"]["metrics"]
    assert records["auto_wandb"]["sources"][0].endswith("wandb-summary.json")
    # a series per metric, from the per-epoch shapes
    assert len(records["auto_jsonl"]["series"]["val_acc"]) == 3
    assert records["auto_jsonl"]["sources"][0].endswith("results.jsonl")
    assert len(records["auto_csv"]["series"]["train_loss"]) == 3
    assert len(records["named_csv"]["series"]["val_acc"]) == 3
    assert records["named_csv"]["sources"] == ["rel/named_csv/metrics.csv"]
    assert len(records["named_jsonl"]["series"]["loss"]) == 3
    # the log's key=value numbers
    assert len(records["auto_log"]["series"]["val_acc"]) == 3
    assert records["auto_log"]["sources"][0].endswith("/log")
    assert "pid" not in records["auto_log"]["metrics"]
    assert set(records["pattern"]["metrics"]) == {"accuracy"}
    assert "val_acc" in records["log_only"]["metrics"]
    assert not any(s.endswith(".json") for s in records["log_only"]["sources"])
    # the final value is on the job record (state file, snapshot)
    final = run.job("auto_log")["metrics"]["val_acc"]
    assert final == records["auto_log"]["series"]["val_acc"][-1]
    assert all(r["status"] == "completed" and r["attempt"] == 1 for r in records.values())


@pytest.mark.asyncio
async def test_grid_results_summary_and_on_complete(tmp_path: Path) -> None:
    hook = (f"{sys.executable} -c \"import os, sys; print(os.environ['EQ_PHASE'], "
            "open(os.environ['EQ_RESULTS']).read().count(chr(10)))\"")
    jobs = [job(f"lr{lr}_s{seed}", f"{TRAIN} --metrics jsonl --lr {lr} --seed {seed}",
                phase="train", params=(("lr", lr), ("seed", seed)))
            for lr in ("0.1", "0.03") for seed in ("1", "2")]
    jobs.append(job("broken", "fake-train --epochs 1 --epoch-seconds 0.05 --exit-code 3",
                    phase="eval"))
    goal = (("val_acc", "max"), ("loss", "min"))
    phases = (PhaseSpec(name="train", results=ResultsSpec(goal=goal, on_complete=hook)),
              PhaseSpec(name="eval", results=ResultsSpec(on_complete="exit 4")))
    manifest = make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 4)), phases=phases,
                             results=ResultsSpec(goal=goal, on_complete=hook))
    code, _ = await run_to_end(manifest, tmp_path / "run", timeout=90)
    assert code == 1  # `broken` is stuck
    run_dir = tmp_path / "run"
    records = records_by_id(run_dir)
    assert records["lr0.1_s2"]["params"] == {"lr": "0.1", "seed": "2"}
    assert records["broken"]["status"] == "stuck"
    summary = (run_dir / "summary.md").read_text()
    results = summary[summary.index("## Results"):]
    assert "| train | 0.03 | - | 2/2 | **" in results  # best val_acc: lr 0.03
    # GPU-h and energy: over completed jobs, none here
    assert "| eval | - | broken | 0/1 | - |  | - |  | - | - | missing broken (stuck) |" in results
    # the hooks: output in the run dir, an alert each; the failing one is an alert, not a failure
    assert (run_dir / "hooks" / "train.log").read_text().split() == ["train", "5"]
    assert (run_dir / "hooks" / "queue.log").read_text().split() == ["5"]
    alerts = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()
              if '"alert"' in line]
    failed = [a for a in alerts if "on_complete of phase eval failed" in a["message"]]
    assert failed and failed[0]["level"] == "error" and "exit code 4" in failed[0]["message"]
    assert any("on_complete of phase train done" in a["message"] for a in alerts)


@pytest.mark.asyncio
async def test_a_resumed_engine_keeps_the_results_and_runs_no_hook_twice(tmp_path: Path) -> None:
    counter = tmp_path / "hook_runs"
    hook = f"echo run >> {counter}"
    jobs = [job(f"s{seed}", f"{TRAIN} --metrics json --seed {seed}",
                params=(("seed", str(seed)),)) for seed in (1, 2)]
    manifest = make_manifest(tmp_path, jobs, results=ResultsSpec(on_complete=hook))
    code, first = await run_to_end(manifest, tmp_path / "run")
    assert code == 0 and counter.read_text() == "run\n"
    before = records_by_id(tmp_path / "run")
    assert all(r["metrics"]["val_acc"] for r in before.values())
    # the same run dir again: every job already done; the results stay, the hook is not rerun
    code, second = await run_to_end(manifest, tmp_path / "run")
    assert code == 0 and counter.read_text() == "run\n"
    after = records_by_id(tmp_path / "run")
    assert {k: r["metrics"] for k, r in after.items()} == \
        {k: r["metrics"] for k, r in before.items()}
    assert second.job("s1")["metrics"] == first.job("s1")["metrics"]


@pytest.mark.asyncio
async def test_an_attempt_that_ended_while_no_engine_read_it_is_read_by_the_next(
        tmp_path: Path) -> None:
    """An engine killed between a job's end and the reading of its metrics: the next engine
    reads them (the job would otherwise keep an earlier attempt's numbers, or none)."""
    jobs = [job(f"s{seed}", f"{TRAIN} --metrics json --seed {seed}") for seed in (1, 2)]
    manifest = make_manifest(tmp_path, jobs)
    code, _first = await run_to_end(manifest, tmp_path / "run")
    assert code == 0
    results = tmp_path / "run" / "results.jsonl"
    lines = results.read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["id"] != "s2"]
    results.write_text("".join(line + "\n" for line in kept))  # s2's was never read
    code, second = await run_to_end(manifest, tmp_path / "run")
    assert code == 0
    read = records_by_id(tmp_path / "run")["s2"]
    assert read["attempt"] == 1 and read["metrics"]["val_acc"], read
    assert second.job("s2")["metrics"]["val_acc"] == read["metrics"]["val_acc"]
