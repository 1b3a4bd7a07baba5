"""Probe round-trip time per host and the engine's tick time over real sshd hosts.

    .venv/bin/python bench/ssh_probe.py [--rounds 30]     (as root: it starts sshd processes)

Starts real OpenSSH servers on loopback with simulated GPUs behind each (tests/support/sshbed),
then measures (1) the probe round trip of every host on its one connection and (2) the engine's
whole tick (probe every host at once, judge, decide, persist) with 2 hosts and with 16, with
200 pending jobs and 2 running per host. Writes bench/results/ssh_probe.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eq_tui.engine.engine import Engine
from eq_tui.hosts.factory import make_hosts
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.manifest.loader import load_manifest_text
from tests.support.sshbed import SshBed


def quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": statistics.median(ordered) * 1000,
            "p95_ms": ordered[int(0.95 * (len(ordered) - 1))] * 1000}


async def probe_rtts(bed: SshBed, rounds: int) -> dict[str, dict[str, float]]:
    from eq_tui.hosts.base import ProbeRequest
    from eq_tui.hosts.ssh import SshRunner

    hosts = {name: ShellHost(name, SshRunner(name, name, config_path=str(bed.ssh_config)))
             for name in bed.hosts}
    try:
        samples: dict[str, list[float]] = {name: [] for name in hosts}
        for _ in range(rounds):
            for name, host in hosts.items():
                snap = await host.probe(ProbeRequest())
                assert snap.ok and snap.rtt_s is not None, snap.error
                samples[name].append(snap.rtt_s)
        return {name: quantiles(values[1:]) for name, values in samples.items()}
    finally:
        for host in hosts.values():
            await host.close()


def manifest_for(bed: SshBed, names: list[str], jobs: int) -> str:
    hosts = "\n".join(f"  - {{name: {n}, ssh: {n}, max_parallel: 2}}" for n in names)
    return (f"project: bench{len(names)}\ncwd: {bed.work}\nhosts:\n{hosts}\n"
            f"grid: {{i: {list(range(jobs))}}}\n"
            "template: {id: 'j${i}', cmd: 'fake-train --epochs 100000 --epoch-seconds 1 "
            "--mem 100 --seed ${i}'}\n")


async def tick_times(bed: SshBed, names: list[str], rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as scratch:
        manifest = load_manifest_text(manifest_for(bed, names, 200), f"{scratch}/m.yaml")
        hosts = make_hosts(manifest, Path(scratch), ssh_config=str(bed.ssh_config))
        engine = Engine(manifest, Path(scratch) / "run", hosts)
        await engine.start(preflight=False)
        try:
            await engine.tick()  # launches 2 per host
            await engine.command("pause")
            samples = []
            for _ in range(rounds):
                start = time.perf_counter()
                await engine.tick()
                samples.append(time.perf_counter() - start)
            running = sum(1 for j in engine.jobs.values() if str(j.status) == "running")
            await engine.command("kill", [j.id for j in engine.jobs.values()
                                          if str(j.status) == "running"])
        finally:
            await engine.stop()
            await engine.run()
        return {"hosts": len(names), "running_jobs": running, **quantiles(samples)}


async def main_async(rounds: int) -> dict[str, object]:
    specs = [(f"h{i:02d}", 8, 81920, "NVIDIA H100 80GB (sim)") for i in range(16)]
    bed = SshBed.create(specs)
    try:
        rtts = await probe_rtts(bed, rounds)
        names = sorted(bed.hosts)
        ticks = [await tick_times(bed, names[:2], rounds), await tick_times(bed, names, rounds)]
    finally:
        bed.close()
    return {"probe_rtt": rtts, "tick": ticks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    result = asyncio.run(main_async(args.rounds))
    rtts = result["probe_rtt"]
    assert isinstance(rtts, dict)
    medians = [v["median_ms"] for v in rtts.values()]
    print(f"probe round trip over one ssh connection, {len(rtts)} hosts x 8 simulated GPUs: "
          f"median of host medians {statistics.median(medians):.1f} ms "
          f"(min {min(medians):.1f}, max {max(medians):.1f})")
    for name, value in sorted(rtts.items())[:2]:
        print(f"  {name}: median {value['median_ms']:.1f} ms, p95 {value['p95_ms']:.1f} ms")
    print(f"{'hosts':>6} {'running':>8} {'tick median ms':>15} {'p95 ms':>8}")
    ticks = result["tick"]
    assert isinstance(ticks, list)
    for row in ticks:
        print(f"{row['hosts']:>6} {row['running_jobs']:>8} {row['median_ms']:>15.1f} "
              f"{row['p95_ms']:>8.1f}")
    ratio = ticks[1]["median_ms"] / ticks[0]["median_ms"]
    print(f"ratio tick(16 hosts) / tick(2 hosts): {ratio:.2f}")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "ssh_probe.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
