"""GPU sharing by memory: makespans and memory-time against one job per GPU, on sshd hosts.

    .venv/bin/python bench/packing.py [--jobs 48] [--seconds 30] [--only declared,auto,mixed]

Every sweep runs `eq-tui --no-ui` (a process of its own) against real sshd hosts on loopback
with simulated GPUs; what ran where and when is read from the fake jobs' own records on the
hosts. Every fake job ramps its memory up over 5 s after it starts (`fake-train --ramp 5`), so
a job placed on memory that another job has not allocated yet would run out of memory. The
crash guard is on, as by default: a healthy sweep never trips it, and it then launches
exactly as with `crash_guard: false`.

- declared: N jobs x 18 GiB (`mem_mib: 18432`) on 2 hosts x 4 GPUs of 80 GiB, against the
  same sweep one job per GPU. 4 jobs fit a GPU (4 x 18 + 1 GiB margin), so equal jobs need
  ceil(N/32) waves against ceil(N/8): that ratio is the most any placement can reach (3x for
  48 jobs, 4x for 64).
- auto: the same with `mem_mib: auto`: the learned estimate against the true peak, OOMs.
- mixed: 6, 18, 40 and 70 GiB jobs of 20-40 s on 4 GPUs of 80 GiB and 4 of 24 GiB: the memory
  -time the jobs used, against a lower bound of what a perfect packing needs (the largest of:
  all the jobs' memory-time over all the GPUs' memory, the 40 and 70 GiB jobs' over the 80 GiB
  GPUs', those jobs' time over 4 GPUs (two of them never fit one 80 GiB GPU together), and the
  longest job): that share is at most what the sweep reached against perfect.

Writes bench/results/packing.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eq_tui.sim.state import read_runs
from tests.support.sshbed import USER, SshBed

GIB = 1024
MARGIN = 1024
RAMP_S = 5


def job_line(job_id: str, mem: int, seconds: float, declared: int | str | None) -> str:
    epochs = max(1, round(seconds / 5))
    cmd = (f"fake-train --epochs {epochs} --epoch-seconds {seconds / epochs:g} --mem {mem} "
           f"--ramp {RAMP_S} --seed {int(job_id[1:])}")  # alike jobs: their seeds differ
    key = "" if declared is None else f", mem_mib: {declared}"
    return f"  - {{id: {job_id}, cmd: \"{cmd}\"{key}}}"


def manifest_text(bed: SshBed, work: Path, name: str, jobs: list[str]) -> str:
    hosts = "\n".join(f"  - {{name: {n}, ssh: {n}, log_dir: {work}/logs, max_parallel: 32}}"
                      for n in bed.hosts)
    return (f"project: {name}\ncwd: {work}\n"
            f"oom_retry: {{delay: 5, max_attempts: 4}}\nhosts:\n{hosts}\njobs:\n"
            + "\n".join(jobs) + "\n")


def run_sweep(name: str, hosts: list[tuple[str, int, int]], jobs: list[str],
              poll: float) -> dict[str, Any]:
    """Run one sweep on fresh hosts; the hosts' own records of it."""
    bed = SshBed.create([(host, gpus, memory, f"Sim {memory // GIB} GiB")
                         for host, gpus, memory in hosts])
    try:
        work = bed.work / name
        work.mkdir()
        shutil.chown(work, USER, USER)
        with tempfile.TemporaryDirectory() as scratch:
            manifest = Path(scratch) / f"{name}.yaml"
            manifest.write_text(manifest_text(bed, work, name, jobs))
            started = time.time()
            done = subprocess.run(
                [sys.executable, "-m", "eq_tui", str(manifest), "--no-ui", "--poll", str(poll),
                 "--ssh-config", str(bed.ssh_config)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1800)
            wall = time.time() - started
            if done.returncode not in (0, 1):  # 1: the queue finished with stuck jobs
                raise SystemExit(f"{name}: eq-tui exited {done.returncode}: "
                                 f"{done.stdout.decode()[-2000:]}")
            state = json.loads((Path(scratch) / "experiment_queue" / name
                                / "queue_state.json").read_text())
        runs = {host: read_runs(bed.hosts[host].sim_state) for host in bed.hosts}
    finally:
        bed.close()
    stuck = {j["id"]: j.get("failure") for j in state["jobs"] if j["status"] != "completed"}
    return {"wall_s": wall, "runs": runs, "state": state, "not_completed": stuck}


def spans(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One entry per fake job run that allocated: host, gpu, job, start, end, mem."""
    found = []
    for host, events in runs.items():
        open_runs: dict[int, dict[str, Any]] = {}
        for event in events:
            if event["event"] == "start":
                open_runs[event["pid"]] = {"host": host, **event}
            elif event["event"] == "end" and event["pid"] in open_runs:
                start = open_runs.pop(event["pid"])
                found.append({"host": host, "gpu": start["gpu"], "job": start["job"],
                              "start": float(start["t"]), "end": float(event["t"])})
    return found


def makespan(result: dict[str, Any]) -> float:
    runs = spans(result["runs"])
    return max(r["end"] for r in runs) - min(r["start"] for r in runs)


def ooms(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for events in result["runs"].values() for e in events if e["event"] == "oom"]


def most_per_gpu(result: dict[str, Any]) -> int:
    edges: dict[tuple[str, int], list[tuple[float, int]]] = {}
    for r in spans(result["runs"]):
        edges.setdefault((r["host"], r["gpu"]), []).extend([(r["start"], 1), (r["end"], -1)])
    most = 0
    for points in edges.values():
        now = 0
        for _, step in sorted(points):
            now += step
            most = max(most, now)
    return most


def uniform(n: int, seconds: float, declared: int | str | None) -> list[str]:
    return [job_line(f"s{i:03d}", 18 * GIB, seconds, declared) for i in range(n)]


def declared_and_auto(n: int, seconds: float, poll: float, which: set[str]) -> dict[str, Any]:
    hosts = [("n1", 4, 80 * GIB), ("n2", 4, 80 * GIB)]
    alone = run_sweep("alone", hosts, uniform(n, seconds, None), poll)
    one_per_gpu = makespan(alone)
    out: dict[str, Any] = {
        "jobs": n, "job_seconds": seconds,
        "one_per_gpu": {"makespan_s": round(one_per_gpu, 1), "ooms": len(ooms(alone)),
                        "not_completed": alone["not_completed"]},
        "bound_ratio_equal_jobs": round(math.ceil(n / 8) / math.ceil(n / 32), 2)}
    for name, declared in (("declared", 18 * GIB), ("auto", "auto")):
        if name not in which:
            continue
        packed = run_sweep(name, hosts, uniform(n, seconds, declared), poll)
        span = makespan(packed)
        entry: dict[str, Any] = {
            "makespan_s": round(span, 1), "speedup": round(one_per_gpu / span, 2),
            "ooms": len(ooms(packed)), "most_jobs_on_one_gpu": most_per_gpu(packed),
            "not_completed": packed["not_completed"]}
        if declared == "auto":
            peaks = [a["peak_mib"] for j in packed["state"]["jobs"] for a in j["history"]
                     if a.get("peak_mib")]
            estimates = sorted({a["estimate_mib"] for j in packed["state"]["jobs"]
                                for a in j["history"] if a.get("estimate_mib")})
            true_peak = 18 * GIB
            entry.update({
                "true_peak_mib": true_peak, "measured_peak_mib": max(peaks) if peaks else None,
                "measured_vs_true": round(max(peaks) / true_peak, 3) if peaks else None,
                "learned_estimates_mib": estimates,
                "estimate_vs_true": [round(e / true_peak, 3) for e in estimates],
                "ran_alone_before_measured": sum(
                    1 for j in packed["state"]["jobs"] for a in j["history"]
                    if a.get("launched", True) and not a.get("shared")),
                "ooms_per_family": len(ooms(packed))})
        out[name] = entry
    return out


def mixed(seconds: float, poll: float) -> dict[str, Any]:
    rng = random.Random(7)
    sizes = [6] * 24 + [18] * 16 + [40] * 8 + [70] * 6
    rng.shuffle(sizes)
    jobs, work = [], []
    for i, size in enumerate(sizes):
        duration = rng.uniform(seconds * 2 / 3, seconds * 4 / 3)
        jobs.append(job_line(f"m{i:03d}", size * GIB, duration, size * GIB))
        work.append((size * GIB, duration))
    hosts = [("big", 4, 80 * GIB), ("small", 4, 24 * GIB)]
    result = run_sweep("mixed", hosts, jobs, poll)
    span = makespan(result)
    # lower bounds on any packing's makespan, with the same margin per GPU
    all_area = sum(mem * d for mem, d in work)
    capacity = 4 * (80 * GIB - MARGIN) + 4 * (24 * GIB - MARGIN)
    big_area = sum(mem * d for mem, d in work if mem > 24 * GIB - MARGIN)
    one_at_a_time = sum(d for mem, d in work if 2 * mem > 80 * GIB - MARGIN) / 4
    bound = max(all_area / capacity, big_area / (4 * (80 * GIB - MARGIN)), one_at_a_time,
                max(d for _, d in work))
    return {"jobs": len(sizes), "sizes_gib": {str(s): sizes.count(s) for s in sorted(set(sizes))},
            "makespan_s": round(span, 1), "perfect_packing_lower_bound_s": round(bound, 1),
            "memory_time_share_of_perfect": round(bound / span, 3),
            "ooms": len(ooms(result)),
            "ooms_during_ramp": sum(1 for e in ooms(result) if e.get("during") == "ramp"),
            "not_completed": result["not_completed"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=48)
    parser.add_argument("--seconds", type=float, default=30.0, help="each job's run time")
    parser.add_argument("--poll", type=float, default=2.0)
    parser.add_argument("--only", default="declared,auto,mixed")
    args = parser.parse_args()
    which = set(args.only.split(","))
    result: dict[str, Any] = {}
    out = Path(__file__).parent / "results" / "packing.json"
    out.parent.mkdir(exist_ok=True)
    if which & {"declared", "auto"}:
        result["uniform"] = declared_and_auto(args.jobs, args.seconds, args.poll, which)
        out.write_text(json.dumps(result, indent=2) + "\n")
    if "mixed" in which:
        result["mixed"] = mixed(args.seconds, args.poll)
        out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
