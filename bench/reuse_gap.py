"""GPU reuse gap and makespan on real sshd hosts with simulated GPUs.

    .venv/bin/python bench/reuse_gap.py [--sweep reference|gap] [--hosts 2] [--poll 2]
                                        [--waves rolling|strict] [--quick] [--no-crash-guard]

Runs a seeded sweep through the engine (in this process, so its counters can be read) against
real sshd hosts on loopback whose GPUs are simulated, then measures from two independent
sources:

- the records the fake jobs write on the hosts (their process's start time, end, and when
  their memory was really released): the reuse gap of every hand-over on a GPU (memory
  released → next job's process started), the makespan, and a zero-overhead replay of the
  same schedule (each GPU's jobs in the same order, each starting the instant the previous
  one's memory was released and its own retry delay was up);
- the engine's own journal (events.jsonl): how long after a job's exit the engine judged it,
  and how long after its launch decision the job's process started.

Sweeps: `reference` — 64 jobs of 5-30 s on 2 hosts x 4 GPUs, memory lingering 1-3 s after
each job, 10 % of them hitting a CUDA OOM on their first try (retried after 5 s); `gap` — the
same kind of jobs, 2 per GPU, for many hosts. `--quick` shortens every job (a look, not figures).
Writes bench/results/reuse_gap-<sweep>-<waves>-<poll>-<hosts>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eq_tui.engine.engine import Engine
from eq_tui.hosts.factory import make_hosts
from eq_tui.manifest.loader import load_manifest
from eq_tui.sim.state import read_runs
from tests.support.sshbed import USER, SshBed

GPUS_PER_HOST = 4
OOM_DELAY_S = 5.0


@dataclass(frozen=True)
class SweepConfig:
    sweep: str = "reference"  # reference | gap
    hosts: int = 2
    poll: float = 2.0
    waves: str = "rolling"
    seed: int = 7
    quick: bool = False
    watch: bool = True  # False: the periodic probe alone, like today's polling scripts
    crash_guard: bool = True  # False: `crash_guard: false` (to show what the guard costs)

    @property
    def label(self) -> str:
        watcher = "" if self.watch else "-nowatch"
        guard = "" if self.crash_guard else "-noguard"
        return f"{self.sweep}-{self.waves}-poll{self.poll:g}-{self.hosts}h{watcher}{guard}"


@dataclass(frozen=True)
class Slot:
    """One attempt's life on a GPU, from the fake job's own records."""

    host: str
    gpu: int
    job: str
    attempt: int
    start: float
    end: float
    released: float


def job_lines(config: SweepConfig) -> list[str]:
    rng = random.Random(config.seed)
    if config.sweep == "reference":
        count, low, high, oom_share = 64, 5.0, 30.0, 0.10
    else:
        count, low, high, oom_share = 2 * GPUS_PER_HOST * config.hosts, 5.0, 30.0, 0.05
    scale = 0.3 if config.quick else 1.0
    lines = []
    for i in range(count):
        seconds = rng.uniform(low, high) * scale
        linger = rng.uniform(1.0, 3.0)
        oom = " --oom-attempts 1" if rng.random() < oom_share else ""
        lines.append(f"  - {{id: j{i:03d}, cmd: 'fake-train --epochs 5 --epoch-seconds "
                     f"{seconds / 5:.3f} --mem 6000 --linger {linger:.2f}{oom}'}}")
    return lines


def manifest_text(bed: SshBed, work: Path, config: SweepConfig) -> str:
    hosts = "\n".join(f"  - {{name: {n}, ssh: {n}, log_dir: {work}/logs}}" for n in bed.hosts)
    guard = "" if config.crash_guard else "crash_guard: false\n"
    head = (f"project: bench\ncwd: {work}\nwaves: {config.waves}\n{guard}"
            f"oom_retry: {{delay: {OOM_DELAY_S:g}, max_attempts: 3}}\nhosts:\n{hosts}\njobs:")
    return "\n".join([head, *job_lines(config)]) + "\n"


def job_start(event: dict[str, Any]) -> float:
    """When the job's process started (exec'd, from /proc), else when it registered its
    memory (after its interpreter's imports)."""
    value = event.get("exec_t")
    return float(value) if value is not None else float(event["t"])


def read_slots(bed: SshBed) -> list[Slot]:
    """Every attempt that reached a GPU: started and ended runs, and OOM'd starts (which hold
    the GPU for an instant: a hand-over like any other)."""
    slots = []
    for name, host in bed.hosts.items():
        starts: dict[int, dict[str, Any]] = {}
        for event in read_runs(host.sim_state):
            kind, pid = event.get("event"), int(event.get("pid", -1))
            if kind == "start":
                starts[pid] = event
            elif kind == "end" and pid in starts:
                start = starts.pop(pid)
                until = event.get("linger_until")
                end = float(event["t"])
                slots.append(Slot(name, int(start["gpu"]), str(start["job"]),
                                  int(start["attempt"]), job_start(start), end,
                                  max(end, float(until)) if until is not None else end))
            elif kind == "oom":
                t = float(event["t"])
                slots.append(Slot(name, int(event["gpu"]), str(event["job"]),
                                  int(event["attempt"]), job_start(event), t, t))
    return slots


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy (user + nice + system), from /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return sum(int(x) for x in fields[:3]) / os.sysconf("SC_CLK_TCK")


def engine_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def reuse_gaps(slots: list[Slot]) -> list[float]:
    by_gpu: dict[tuple[str, int], list[Slot]] = {}
    for slot in slots:
        by_gpu.setdefault((slot.host, slot.gpu), []).append(slot)
    gaps: list[float] = []
    for runs in by_gpu.values():
        runs.sort(key=lambda s: s.start)
        gaps.extend(after.start - before.released for before, after in itertools.pairwise(runs))
    return gaps


def double_bookings(slots: list[Slot]) -> int:
    """Hand-overs where the next job started before the previous one's memory was released
    (a GPU given to two jobs at once): must be 0."""
    return sum(1 for gap in reuse_gaps(slots) if gap < 0)


def zero_overhead_makespan(slots: list[Slot], *, strict: bool) -> float:
    """The same schedule with no overhead: each GPU runs its attempts in the order they ran,
    each starting as soon as the GPU's previous memory was released and (for a retry) the
    retry delay after its previous attempt was up. With strict waves, a wave (the attempts
    launched while none of ours was running) starts when every attempt of the previous one has
    ended, each of its attempts once its GPU's memory is released."""
    t0 = min(slot.start for slot in slots)
    ideal_release: dict[tuple[str, int], float] = {}
    ideal_end: dict[tuple[str, int], float] = {}
    finish = t0
    if strict:
        # a wave: the attempts launched while none of ours was running (the engine's rule)
        waves: list[list[Slot]] = []
        for slot in sorted(slots, key=lambda s: s.start):
            if waves and slot.start < max(s.end for s in waves[-1]):
                waves[-1].append(slot)
            else:
                waves.append([slot])
        begin = t0
        for wave in waves:
            begin = max([begin] + [ideal_end.get((s.job, s.attempt - 1), t0) + OOM_DELAY_S
                                   for s in wave if s.attempt > 1])
            ended = begin
            for slot in wave:
                gpu = (slot.host, slot.gpu)
                start = max(begin, ideal_release.get(gpu, t0))
                ideal_end[(slot.job, slot.attempt)] = start + (slot.end - slot.start)
                ideal_release[gpu] = start + (slot.released - slot.start)
                ended = max(ended, ideal_end[(slot.job, slot.attempt)])
                finish = max(finish, ideal_release[gpu])
            begin = ended
        return finish - t0
    for slot in sorted(slots, key=lambda s: s.start):
        gpu = (slot.host, slot.gpu)
        ready = ideal_release.get(gpu, t0)
        if slot.attempt > 1:
            ready = max(ready, ideal_end.get((slot.job, slot.attempt - 1), t0) + OOM_DELAY_S)
        ideal_end[(slot.job, slot.attempt)] = ready + (slot.end - slot.start)
        ideal_release[gpu] = ready + (slot.released - slot.start)
        finish = max(finish, ideal_release[gpu])
    return finish - t0


def engine_latencies(run_dir: Path, slots: list[Slot]) -> dict[str, float]:
    """From the engine's journal: exit → judged, and launch decision → process started."""
    decided: dict[tuple[str, int], float] = {}
    judged: dict[tuple[str, int], float] = {}
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("type") != "job_state_changed":
            continue
        key = (str(event["job"]), int(event.get("attempt") or 0))
        if event.get("new") == "launching":
            decided[key] = float(event["at"])
        elif event.get("old") in ("running", "launching") and event.get("new") not in (
                "running", "launching"):
            judged.setdefault(key, float(event["at"]))
    exit_to_judged = [judged[(s.job, s.attempt)] - s.end for s in slots
                      if (s.job, s.attempt) in judged]
    decision_to_start = [s.start - decided[(s.job, s.attempt)] for s in slots
                         if (s.job, s.attempt) in decided]
    return {"exit_to_judged_median_s": statistics.median(exit_to_judged),
            "exit_to_judged_p95_s": percentile(exit_to_judged, 0.95),
            "decision_to_start_median_s": statistics.median(decision_to_start),
            "decision_to_start_p95_s": percentile(decision_to_start, 0.95)}


async def run_engine(manifest_path: Path, run_dir: Path, poll: float, watch: bool,
                     ssh_config: str) -> Engine:
    manifest = load_manifest(str(manifest_path))
    hosts = make_hosts(manifest, run_dir, ssh_config=ssh_config)
    engine = Engine(manifest, run_dir, hosts, poll=poll, exit_when_done=True, watch=watch)
    await engine.start()
    await engine.run()
    return engine


def run_sweep(config: SweepConfig) -> dict[str, Any]:
    bed = SshBed.create([(f"g{i:02d}", GPUS_PER_HOST, 24576, "NVIDIA L40S (sim)")
                         for i in range(config.hosts)])
    try:
        work = bed.work / "bench"
        work.mkdir()
        shutil.chown(work, USER, USER)
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "bench.yaml"
            path.write_text(manifest_text(bed, work, config))
            started = time.monotonic()
            machine_before, engine_before = machine_cpu_s(), engine_cpu_s()
            engine = asyncio.run(run_engine(path, Path(scratch) / "run", config.poll,
                                            config.watch, str(bed.ssh_config)))
            wall = time.monotonic() - started
            machine_cpu = machine_cpu_s() - machine_before
            engine_cpu = engine_cpu_s() - engine_before
            slots = read_slots(bed)
            latencies = engine_latencies(Path(scratch) / "run", slots)
        probes_server = {name: len(host.commands("probe.sh")) for name, host in bed.hosts.items()}
    finally:
        bed.close()
    gaps = reuse_gaps(slots)
    t0 = min(s.start for s in slots)
    makespan = max(s.released for s in slots) - t0
    ideal = zero_overhead_makespan(slots, strict=config.waves == "strict")
    statuses = [str(job.status) for job in engine.jobs.values()]
    return {
        "config": {"sweep": config.sweep, "hosts": config.hosts, "gpus": config.hosts *
                   GPUS_PER_HOST, "poll_s": config.poll, "waves": config.waves,
                   "seed": config.seed, "quick": config.quick, "watch": config.watch,
                   "jobs": len(engine.jobs)},
        "gap_median_s": statistics.median(gaps), "gap_p95_s": percentile(gaps, 0.95),
        "gap_max_s": max(gaps), "hand_overs": len(gaps),
        "makespan_s": makespan, "zero_overhead_makespan_s": ideal,
        "makespan_ratio": makespan / ideal, "double_bookings": double_bookings(slots),
        **latencies,
        "attempts": len(slots), "completed": statuses.count("completed"),
        "ticks": engine.pacing.ticks, "full_ticks": engine.pacing.full_ticks,
        "watch_wakeups": engine.pacing.watch_wakeups,
        "launches_on_watch_reading": engine.pacing.launches_on_watch_reading,
        # placed in the tick that judged the exit, waiting on the host for the memory to go
        "launches_waiting_for_drain": engine.launcher.drains.placed,
        # server-side count of probe commands (each host's sshd logs them) per probe the
        # engine made of that host: exactly 1.0 means one round trip per host per tick
        "probe_commands_per_host_tick": max(
            probes_server[name] / max(1, engine.probes_by_host.get(name, 0))
            for name in probes_server),
        "wall_s": wall,
        # every attempt on a GPU (times from the fake jobs), to check any figure above
        "slots": [dataclasses.asdict(slot) for slot in sorted(slots, key=lambda s: s.start)],
        # where the machine's CPU went: the engine process itself, and everything (the
        # simulated hosts' sshd, nvidia-smi stand-in, fake jobs, screen, the engine)
        "engine_cpu_s": engine_cpu, "machine_cpu_s": machine_cpu,
        "machine_busy_share": machine_cpu / (wall * (os.cpu_count() or 1)),
    }


def describe(result: dict[str, Any]) -> str:
    c = result["config"]
    watcher = "" if c["watch"] else " (no watcher)"
    return (f"{c['sweep']} sweep, {c['waves']}, poll {c['poll_s']:g} s{watcher}, "
            f"{c['hosts']} hosts x {GPUS_PER_HOST} GPUs, {c['jobs']} jobs: reuse gap median "
            f"{result['gap_median_s']:.2f} s, p95 {result['gap_p95_s']:.2f} s over "
            f"{result['hand_overs']} hand-overs; makespan {result['makespan_s']:.1f} s vs "
            f"{result['zero_overhead_makespan_s']:.1f} s zero-overhead "
            f"({(result['makespan_ratio'] - 1) * 100:+.1f} %); exit→judged median "
            f"{result['exit_to_judged_median_s']:.2f} s, decision→start median "
            f"{result['decision_to_start_median_s']:.2f} s (a launch placed while its GPU "
            f"drained waits there: {result.get('launches_waiting_for_drain', 0)} did)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", choices=("reference", "gap"), default="reference")
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--poll", type=float, default=2.0)
    parser.add_argument("--waves", choices=("rolling", "strict"), default="rolling")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="shorter jobs: a look, not figures")
    parser.add_argument("--no-watch", action="store_true",
                        help="the periodic probe alone (how polling scripts work)")
    parser.add_argument("--no-crash-guard", action="store_true",
                        help="crash_guard: false (what the default guard costs a healthy sweep)")
    args = parser.parse_args()
    config = SweepConfig(args.sweep, args.hosts, args.poll, args.waves, args.seed, args.quick,
                         watch=not args.no_watch, crash_guard=not args.no_crash_guard)
    result = run_sweep(config)
    print(describe(result))
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / f"reuse_gap-{config.label}.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
