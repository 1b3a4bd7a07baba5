"""Early stopping on the simulator: GPU-seconds with and without `early_stop:`, and whether the
best configuration is still found, over several seeds of the bench.

    .venv/bin/python bench/early_stop.py [--seeds 10] [--epoch-seconds 0.3]

A sweep of 9 learning rates x 2 seeds, 9 epochs, on 3 simulated GPUs; fake-train's learning
curves are known (--lr: the quality peaks at 0.03; each seed shifts the curve by up to ±0.015).
Each bench seed shuffles the grid's order and picks other training seeds, then runs the sweep
with asha (eta 3, grace 1) through the real engine and real screen sessions. The sweep without
early stopping runs once per bench seed too unless --baseline-once. GPU-seconds are the hosts'
own records (each fake-train process's start to its end, times its GPUs), not the engine's.
"Best found" is the results table's best row by val_acc (the mean over the completed seeds).
Writes bench/results/early_stop.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eq_tui.engine.engine import Engine
from eq_tui.hosts.factory import make_hosts, sim_state_dir
from eq_tui.manifest.model import (
    EarlyStopSpec,
    HostSpec,
    JobSpec,
    Manifest,
    PhaseSpec,
    ResultsSpec,
    SimulateSpec,
)
from eq_tui.results.group import group
from eq_tui.results.records import read_records
from eq_tui.sim.state import read_runs

OUT = Path(__file__).resolve().parent / "results"
LRS = ["0.0003", "0.001", "0.003", "0.01", "0.03", "0.1", "0.3", "1", "3"]
BEST = "0.03"


def sweep_manifest(tmp: Path, order: list[tuple[str, int]], epoch_s: float,
                   early: bool) -> Manifest:
    """The sweep as the loader would make it from a grid, in the bench seed's order."""
    jobs = tuple(JobSpec(id=f"lr{lr}_s{seed}", phase="main",
                         cmd=f"fake-train --lr {lr} --seed {seed} --epochs 9 "
                             f"--epoch-seconds {epoch_s} --mem 2000",
                         params=(("lr", lr), ("seed", str(seed))))
                 for lr, seed in order)
    spec = EarlyStopSpec(metric="val_acc", goal="max", rule="asha", grace=1, eta=3) \
        if early else None
    results = ResultsSpec(goal=(("val_acc", "max"),), early_stop=spec)
    source = tmp / "eq-tui.yaml"
    source.touch()
    return Manifest(project="bench", source=str(source), jobs=jobs,
                    hosts=(HostSpec(name="sim", simulate=SimulateSpec(gpus=3)),),
                    phases=(PhaseSpec(name="main", results=results),), results=results)


def gpu_seconds(state_dir: Path) -> float:
    started: dict[int, float] = {}
    total = 0.0
    for record in read_runs(state_dir):
        if record.get("event") == "start":
            started[int(record["pid"])] = float(record["t"])
        elif record.get("event") == "end" and int(record["pid"]) in started:
            gpus = len(record.get("gpus") or [0])
            total += (float(record["t"]) - started.pop(int(record["pid"]))) * gpus
    return total


async def one_sweep(tmp: Path, order: list[tuple[str, int]], epoch_s: float,
                    early: bool) -> dict[str, Any]:
    manifest = sweep_manifest(tmp, order, epoch_s, early)
    run_dir = tmp / ("run_early" if early else "run_full")
    engine = Engine(manifest, run_dir, make_hosts(manifest, run_dir), poll=0.2,
                    exit_when_done=True)
    began = time.monotonic()
    await engine.start()
    code = await engine.run()
    wall = time.monotonic() - began
    statuses = [str(job.status) for job in engine.jobs.values()]
    table = group(read_records(run_dir) or [], group_over="seed", goals={"val_acc": "max"})
    best = [row.params.get("lr") for row in table.rows if "val_acc" in row.best]
    best_done = sum(1 for job in engine.jobs.values()
                    if job.params.get("lr") == BEST and str(job.status) == "completed")
    return {"exit": code, "gpu_s": round(gpu_seconds(sim_state_dir(run_dir, "sim")), 1),
            "wall_s": round(wall, 1), "pruned": statuses.count("pruned"),
            "best": best[0] if len(best) == 1 else best, "best_jobs_completed": best_done}


async def bench(seeds: int, epoch_s: float, baseline_once: bool) -> dict[str, Any]:
    runs = []
    baseline: dict[str, Any] | None = None
    for seed in range(seeds):
        rng = random.Random(seed)
        train_seeds = (2 * seed + 1, 2 * seed + 2)
        order = [(lr, s) for lr in LRS for s in train_seeds]
        rng.shuffle(order)
        with tempfile.TemporaryDirectory(prefix="eq-bench-es-") as tmp:
            early = await one_sweep(Path(tmp), order, epoch_s, True)
            if baseline is None or not baseline_once:
                baseline = await one_sweep(Path(tmp), order, epoch_s, False)
        share = early["gpu_s"] / baseline["gpu_s"]
        runs.append({"seed": seed, "early": early, "full": baseline, "share": round(share, 3)})
        print(f"seed {seed}: {early['gpu_s']:.0f} of {baseline['gpu_s']:.0f} GPU-s "
              f"({share:.0%}), pruned {early['pruned']}, best lr {early['best']} "
              f"(full sweep: {baseline['best']}), exit {early['exit']}", flush=True)
    found = sum(1 for r in runs if r["early"]["best"] == BEST)
    return {"seeds": seeds, "epoch_seconds": epoch_s, "runs": runs,
            "best_found": found, "share_median": statistics.median(r["share"] for r in runs),
            "share_max": max(r["share"] for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--epoch-seconds", type=float, default=0.3)
    parser.add_argument("--baseline-once", action="store_true",
                        help="run the sweep without early stopping for the first seed only")
    args = parser.parse_args()
    out = asyncio.run(bench(args.seeds, args.epoch_seconds, args.baseline_once))
    print(f"best configuration found in {out['best_found']} of {out['seeds']} seeds; "
          f"GPU-seconds with early_stop: median {out['share_median']:.0%}, at most "
          f"{out['share_max']:.0%} of the sweep without it")
    OUT.mkdir(exist_ok=True)
    (OUT / "early_stop.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
