"""Scheduler decision cost per tick at 100, 1,000 and 10,000 jobs over 16 hosts x 8 GPUs.

    .venv/bin/python bench/scale.py [--repeat 50]

Prints the median and p95 of one `decide()` call (the pure decision of a tick) with a quarter
of the jobs finished, a GPU's worth running and the rest pending, and writes
bench/results/scale.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from eq_tui.engine.model import JobState, JobStatus
from eq_tui.engine.scheduler import GpuView, HostView, decide
from eq_tui.manifest.model import JobSpec, Manifest

HOSTS, GPUS = 16, 8


def scenario(n_jobs: int) -> tuple[Manifest, list[JobState], list[HostView]]:
    specs = tuple(JobSpec(id=f"j{i}", phase="main", cmd=f"python run.py --seed {i}")
                  for i in range(n_jobs))
    manifest = Manifest(project="bench", source="bench.yaml", jobs=specs)
    jobs = [JobState(id=s.id, phase=s.phase, cmd=s.cmd) for s in specs]
    running = 0
    for i, job in enumerate(jobs):
        if i < n_jobs // 4:
            job.status = JobStatus.COMPLETED
        elif running < HOSTS * GPUS - 8:  # all but 8 GPUs busy: the scheduler has work to do
            job.status = JobStatus.RUNNING
            job.host, job.gpus = f"h{running // GPUS}", [running % GPUS]
            running += 1
    hosts = [HostView(name=f"h{h}", usable=True,
                      gpus=tuple(GpuView(g, 0) for g in range(GPUS)), allowed=None,
                      max_parallel=GPUS) for h in range(HOSTS)]
    return manifest, jobs, hosts


def measure(n_jobs: int, repeat: int) -> dict[str, float]:
    manifest, jobs, hosts = scenario(n_jobs)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        decision = decide(manifest, jobs, hosts, now=0.0, paused=False, preconditions={})
        samples.append((time.perf_counter() - start) * 1000)
    pending = sum(1 for j in jobs if j.status == JobStatus.PENDING)
    assert len(decision.launches) == min(8, pending)
    samples.sort()
    return {"jobs": n_jobs, "median_ms": statistics.median(samples),
            "p95_ms": samples[int(0.95 * (len(samples) - 1))]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    rows = [measure(n, args.repeat) for n in (100, 1_000, 10_000)]
    print(f"scheduler decide() per tick, {HOSTS} hosts x {GPUS} GPUs (target: median < 10 ms "
          "at 10,000 jobs)")
    print(f"{'jobs':>8} {'median ms':>10} {'p95 ms':>8} {'ratio to 100':>13}")
    for row in rows:
        print(f"{row['jobs']:>8} {row['median_ms']:>10.2f} {row['p95_ms']:>8.2f} "
              f"{row['median_ms'] / rows[0]['median_ms']:>13.1f}")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "scale.json").write_text(json.dumps(rows, indent=1))




def engine_figures(n_jobs: int = 10_000) -> dict[str, float]:
    """A whole engine with n_jobs on one simulated 8-GPU host: resident memory, a paused
    tick (probe + judge + decide + persist) and the state file's size."""
    import asyncio
    import resource
    import tempfile

    from eq_tui.engine.engine import Engine
    from eq_tui.hosts.factory import make_hosts
    from eq_tui.manifest.model import HostSpec, SimulateSpec

    async def run(scratch: Path) -> dict[str, float]:
        specs = tuple(JobSpec(id=f"j{i}", phase="main", cmd=f"python run.py --seed {i}")
                      for i in range(n_jobs))
        manifest = Manifest(project="bench", source=str(scratch / "m.yaml"), jobs=specs,
                            hosts=(HostSpec(name="sim", simulate=SimulateSpec(gpus=8)),))
        engine = Engine(manifest, scratch / "run", make_hosts(manifest, scratch / "run"),
                        control_socket=False)
        await engine.start(preflight=False)
        await engine.command("pause")
        samples = []
        for _ in range(10):
            start = time.perf_counter()
            await engine.tick()
            samples.append((time.perf_counter() - start) * 1000)
        await engine.stop()
        await engine.run()
        return {"jobs": n_jobs, "tick_median_ms": statistics.median(samples),
                "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "state_kb": (scratch / "run" / "queue_state.json").stat().st_size / 1024}

    with tempfile.TemporaryDirectory() as scratch:
        return asyncio.run(run(Path(scratch)))


def print_engine_figures() -> None:
    row = engine_figures()
    print(f"whole engine, {row['jobs']:,} jobs on one simulated host: paused tick "
          f"{row['tick_median_ms']:.0f} ms median, peak RSS {row['rss_mb']:.0f} MB "
          f"(target < 150 MB), state file {row['state_kb']:.0f} KB")


if __name__ == "__main__":
    main()
    print_engine_figures()
