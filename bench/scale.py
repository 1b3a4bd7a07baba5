"""Cost at scale: the scheduler's decision per tick at 100, 1,000 and 10,000 jobs over 16 hosts
x 8 GPUs, and a whole engine with 10,000 jobs (memory, a tick, the state file, what a tick
writes to the run dir).

    .venv/bin/python bench/scale.py [--quick]

decide() runs with a quarter of the jobs finished, all but 8 GPUs running a job and the rest
pending (8 launches to decide), and once more with no GPU free. The engine runs in a child
process (so its peak RSS is its own) on one simulated 8-GPU host, paused; 50 pending jobs are
then killed in one command and the bytes it writes are counted — with the state journal, and
with the whole state rewritten as every change did before the journal. Prints a table and
writes bench/results/scale.json; `run(quick)` returns the same figures as a dict.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.decide.scheduler import GpuView, HostView, decide
from eq_tui.engine.tick.memory import MemoryPlan, any_without_gpu
from eq_tui.manifest.model import JobSpec, Manifest

HOSTS, GPUS = 16, 8
SIZES = (100, 1_000, 10_000)
ENGINE_JOBS = 10_000
CHANGED = 50
RESULTS = Path(__file__).resolve().parent / "results"


def scenario(n_jobs: int, *, busy: bool = False, prioritised: bool = False,
             packed: bool = False) -> tuple[Manifest, list[JobState], list[HostView]]:
    """`busy`: every GPU's memory reads in use (no job can be placed anywhere).
    `prioritised`: every 7th job has a priority (the waiting jobs are sorted each tick).
    `packed`: every job says its memory (mem_mib), so jobs are placed by memory, several to
    a GPU of 80 GB where they fit."""
    mem = 6000 if packed else None
    specs = tuple(JobSpec(id=f"j{i}", phase="main", cmd=f"python run.py --seed {i}",
                          mem_mib=mem) for i in range(n_jobs))
    manifest = Manifest(project="bench", source="bench.yaml", jobs=specs)
    jobs = [JobState(id=s.id, phase=s.phase, cmd=s.cmd,
                     priority=(i % 5) if prioritised and i % 7 == 0 else 0)
            for i, s in enumerate(specs)]
    running = 0
    for i, job in enumerate(jobs):
        if i < n_jobs // 4:
            job.status = JobStatus.COMPLETED
        elif running < HOSTS * GPUS - 8:  # all but 8 GPUs busy: the scheduler has work to do
            job.status = JobStatus.RUNNING
            job.history.append(Attempt(n=1, host=f"h{running // GPUS}", gpus=[running % GPUS],
                                       session=f"s{i}", attempt_dir=f"/d/{i}", log=f"/d/{i}/log"))
            running += 1
    used = 20_000 if busy else 0
    hosts = [HostView(name=f"h{h}", usable=True,
                      gpus=tuple(GpuView(g, used, 81_559, 0) for g in range(GPUS)),
                      allowed=None, max_parallel=GPUS) for h in range(HOSTS)]
    return manifest, jobs, hosts


def measure_decide(n_jobs: int, repeat: int, *, busy: bool = False,
                   prioritised: bool = False, packed: bool = False) -> dict[str, float]:
    manifest, jobs, hosts = scenario(n_jobs, busy=busy, prioritised=prioritised, packed=packed)
    specs = manifest.job_specs
    memory = MemoryPlan(specs, {}, {}, 0.0, cpu_jobs=any_without_gpu(
        specs.values())) if packed else None
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        decision = decide(manifest, jobs, hosts, now=0.0, paused=False, preconditions={},
                          memory=memory)
        samples.append((time.perf_counter() - start) * 1000)
    pending = sum(1 for j in jobs if j.status == JobStatus.PENDING)
    # packed too: each host runs at most 8 jobs (max_parallel), so the 8 free GPUs take one each
    assert len(decision.launches) == (0 if busy else min(8, pending))
    samples.sort()
    return {"median": statistics.median(samples),
            "p95": samples[int(0.95 * (len(samples) - 1))]}


def engine_figures(n_jobs: int, ticks: int) -> dict[str, Any]:
    """A whole engine with n_jobs on one simulated 8-GPU host, paused (run in a child)."""
    import asyncio
    import resource
    import tempfile

    from eq_tui.engine.engine import Engine
    from eq_tui.hosts.factory import make_hosts
    from eq_tui.manifest.model import HostSpec, SimulateSpec

    async def written(engine: Engine, job_ids: list[str]) -> dict[str, float]:
        """Bytes (state file + journal, events) and time of one command changing the jobs."""
        state = engine.run_dir.state
        events = engine.run_dir.events_file
        state_before, events_before = state.bytes_written, events.stat().st_size
        start = time.perf_counter()
        await engine.command("kill", job_ids)
        return {"ms": (time.perf_counter() - start) * 1000,
                "state_kb": (state.bytes_written - state_before) / 1024,
                "events_kb": (events.stat().st_size - events_before) / 1024}

    async def run(scratch: Path) -> dict[str, Any]:
        specs = tuple(JobSpec(id=f"j{i}", phase="main", cmd=f"python run.py --seed {i}")
                      for i in range(n_jobs))
        manifest = Manifest(project="bench", source=str(scratch / "m.yaml"), jobs=specs,
                            hosts=(HostSpec(name="sim", simulate=SimulateSpec(gpus=8)),))
        engine = Engine(manifest, scratch / "run", make_hosts(manifest, scratch / "run"))
        await engine.start(preflight=False)
        await engine.command("pause")
        samples = []
        for _ in range(ticks):
            start = time.perf_counter()
            await engine.tick()
            samples.append((time.perf_counter() - start) * 1000)
        state = engine.run_dir.state
        journal = await written(engine, [f"j{i}" for i in range(100, 100 + CHANGED)])
        small_bytes = state.small_bytes
        state.small_bytes = 1 << 40  # every change rewrites the state whole: as before
        whole = await written(engine, [f"j{i}" for i in range(200, 200 + CHANGED)])
        state.small_bytes = small_bytes
        start = time.perf_counter()
        engine.persistence.persist(whole=True)
        whole_write_ms = (time.perf_counter() - start) * 1000
        await engine.stop()
        await engine.run()
        return {"jobs": n_jobs, "tick_ms": statistics.median(samples),
                "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "state_kb": engine.run_dir.state_file.stat().st_size / 1024,
                "changed_per_tick": CHANGED, "journal": journal, "whole_rewrite": whole,
                "whole_write_ms": whole_write_ms}

    with tempfile.TemporaryDirectory() as scratch:
        return asyncio.run(run(Path(scratch)))


def _engine_in_child(quick: bool) -> dict[str, Any]:
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from bench import scale; "
            "print(json.dumps(scale.engine_figures(int(sys.argv[2]), int(sys.argv[3]))))")
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code, str(root), str(ENGINE_JOBS),
                          "3" if quick else "10"], capture_output=True, text=True, check=True,
                         cwd=root)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(quick: bool) -> dict[str, Any]:
    """Every figure, as printed and as written to bench/results/scale.json."""
    repeat = 10 if quick else 50
    decide_ms: dict[str, dict[str, float]] = {}
    for n in SIZES:
        row = measure_decide(n, repeat)
        decide_ms[str(n)] = {**row, "ratio_to_100": 0.0}
    base = decide_ms[str(SIZES[0])]["median"]
    for row in decide_ms.values():
        row["ratio_to_100"] = row["median"] / base
    return {
        "config": {"hosts": HOSTS, "gpus_per_host": GPUS, "decide_repeat": repeat,
                   "engine_jobs": ENGINE_JOBS, "engine_host": "one simulated host, 8 GPUs",
                   "changed_per_tick": CHANGED, "quick": quick},
        "decide_ms": decide_ms,
        "decide_no_free_gpu_ms": measure_decide(SIZES[-1], repeat, busy=True),
        "decide_prioritised_ms": measure_decide(SIZES[-1], repeat, prioritised=True),
        "decide_packed_ms": measure_decide(SIZES[-1], repeat, packed=True),
        "engine": _engine_in_child(quick),
    }


def report(result: dict[str, Any]) -> str:
    config, engine = result["config"], result["engine"]
    journal, whole = engine["journal"], engine["whole_rewrite"]
    lines = [f"scheduler decide() per tick, {config['hosts']} hosts x {config['gpus_per_host']} "
             f"GPUs, {config['decide_repeat']} runs (target: median < 10 ms at 10,000 jobs)",
             f"{'jobs':>8} {'median ms':>10} {'p95 ms':>8} {'x 100 jobs':>11}"]
    for n, row in result["decide_ms"].items():
        lines.append(f"{int(n):>8,} {row['median']:>10.2f} {row['p95']:>8.2f} "
                     f"{row['ratio_to_100']:>11.1f}")
    idle = result["decide_no_free_gpu_ms"]
    lines.append(f"{SIZES[-1]:>8,} {idle['median']:>10.3f} {idle['p95']:>8.3f}"
                 f"{'':>12} no GPU free")
    ranked = result["decide_prioritised_ms"]
    lines.append(f"{SIZES[-1]:>8,} {ranked['median']:>10.2f} {ranked['p95']:>8.2f}"
                 f"{'':>12} with priorities (waiting jobs sorted)")
    packed = result["decide_packed_ms"]
    lines.append(f"{SIZES[-1]:>8,} {packed['median']:>10.2f} {packed['p95']:>8.2f}"
                 f"{'':>12} placed by memory (every job's mem_mib)")
    ratio = (whole["state_kb"] / journal["state_kb"]) if journal["state_kb"] else float("inf")
    lines += [
        f"whole engine, {engine['jobs']:,} jobs on {config['engine_host']} (paused):",
        f"  peak RSS {engine['rss_mb']:.0f} MB (target < 150 MB), a tick {engine['tick_ms']:.0f}"
        f" ms median (mostly the probe), state file {engine['state_kb']:,.0f} KB",
        f"  {engine['changed_per_tick']} jobs changed: {'state':>10} {'events':>8} {'ms':>6}",
        f"  {'journal':>16} {journal['state_kb']:>7.1f} KB {journal['events_kb']:>5.1f} KB "
        f"{journal['ms']:>6.1f}",
        f"  {'whole rewrite':>16} {whole['state_kb']:>7.0f} KB {whole['events_kb']:>5.1f} KB "
        f"{whole['ms']:>6.1f}   ({ratio:.0f}x the journal's bytes)",
        f"  a whole write from the engine's jobs (start, finish): "
        f"{engine['whole_write_ms']:.0f} ms",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (a look, not figures)")
    args = parser.parse_args()
    result = run(args.quick)
    print(report(result))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scale.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
