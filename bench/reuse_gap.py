"""GPU reuse gap and makespan on real sshd hosts with simulated GPUs.

    .venv/bin/python bench/reuse_gap.py [--jobs 32] [--hosts 2] [--poll 2] [--waves rolling]

Runs a seeded sweep (jobs of 3-8 s, memory lingering 1-3 s after each job, a few OOM retries)
through the real binary (`eq-tui --no-ui`) and measures, from the records the fake jobs write
on the hosts: the gap between a GPU's memory being released and the next job starting on it
(median, p95) and the makespan. Writes bench/results/reuse_gap-<waves>-<poll>.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eq_tui.sim.state import read_runs, run_intervals
from tests.support.sshbed import USER, SshBed


def manifest(bed: SshBed, work: Path, jobs: int, waves: str, seed: int) -> str:
    rng = random.Random(seed)
    hosts = "\n".join(f"  - {{name: {n}, ssh: {n}, log_dir: {work}/logs}}" for n in bed.hosts)
    lines = [f"project: gap\ncwd: {work}\nwaves: {waves}\noom_retry: {{delay: 2, "
             f"max_attempts: 3}}\nhosts:\n{hosts}\njobs:"]
    for i in range(jobs):
        seconds = rng.uniform(3, 8)
        linger = rng.uniform(1, 3)
        oom = " --oom-attempts 1" if rng.random() < 0.1 else ""
        lines.append(f"  - {{id: j{i:03d}, cmd: 'fake-train --epochs 4 --epoch-seconds "
                     f"{seconds / 4:.2f} --mem 6000 --linger {linger:.1f}{oom}'}}")
    return "\n".join(lines) + "\n"


def measure(bed: SshBed) -> dict[str, float]:
    gaps: list[float] = []
    makespan_start, makespan_end = float("inf"), 0.0
    for host in bed.hosts.values():
        intervals = run_intervals(read_runs(host.sim_state))
        by_gpu: dict[int, list] = {}
        for interval in intervals:
            by_gpu.setdefault(interval.gpu, []).append(interval)
            makespan_start = min(makespan_start, interval.start)
            makespan_end = max(makespan_end, interval.released)
        for runs in by_gpu.values():
            runs.sort(key=lambda r: r.start)
            for before, after in itertools.pairwise(runs):
                gaps.append(after.start - before.released)
    gaps.sort()
    return {"gap_median_s": statistics.median(gaps),
            "gap_p95_s": gaps[int(0.95 * (len(gaps) - 1))], "gaps": len(gaps),
            "makespan_s": makespan_end - makespan_start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--poll", type=float, default=2.0)
    parser.add_argument("--waves", choices=("rolling", "strict"), default="rolling")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    bed = SshBed.create([(f"g{i}", 4, 24576, "NVIDIA L40S (sim)") for i in range(args.hosts)])
    try:
        work = bed.work / "gap"
        work.mkdir()
        shutil.chown(work, USER, USER)
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "gap.yaml"
            path.write_text(manifest(bed, work, args.jobs, args.waves, args.seed))
            started = time.monotonic()
            subprocess.run([sys.executable, "-m", "eq_tui", str(path), "--no-ui", "--poll",
                            str(args.poll), "--ssh-config", str(bed.ssh_config), "--run-dir",
                            f"{scratch}/run"], check=False, capture_output=True)
            wall = time.monotonic() - started
        result = measure(bed)
    finally:
        bed.close()
    result.update(jobs=args.jobs, hosts=args.hosts, poll=args.poll, waves=args.waves,
                  wall_s=wall)
    print(f"{args.waves}, poll {args.poll:g} s, {args.hosts} hosts x 4 GPUs, {args.jobs} jobs: "
          f"reuse gap median {result['gap_median_s']:.2f} s, p95 {result['gap_p95_s']:.2f} s "
          f"over {result['gaps']} hand-overs; makespan {result['makespan_s']:.1f} s "
          f"(wall {wall:.1f} s)")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / f"reuse_gap-{args.waves}-{args.poll:g}.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
