"""Live metrics of 1,000 running jobs: the engine's tick and its probe round trips, against the
commit before the results feature.

    .venv/bin/python bench/live_metrics.py [--rounds 2] [--ticks 30] [--hosts 16]
        [--jobs-per-host 63] [--old /work/pre-results] [--quick]    (as root: it starts sshd)

A running job's live metrics come from the last log line the per-tick probe already brings (the
UI parses it); the engine reads a metrics file once, when an attempt ends. This bench shows what
that costs while jobs run: one bed of real sshd hosts on loopback (tests/support/sshbed), each
with as many simulated GPUs as it gets jobs, every job a shell loop printing
`step=N loss=... val_acc=...` each second. For each checkout, interleaved old/new/old/new on the
same bed, a worker process (that checkout's venv and eq_tui) builds the engine as
bench/ssh_probe.py does, ticks until every job runs, pauses, waits until every job has printed a
metric line, times `--ticks` engine ticks (probe every host, judge, decide, persist). Then this
process ends every job's screen session (SIGTERM: the engine's own kill does them one at a time,
many minutes for 1,000 on a loaded box) and the worker ticks until no host lists one. Around the
timed ticks this process counts the probe commands each host's sshd ran (its commands log) and
divides them by the probes the engine made of that host: 1.00 is one round trip per host per
tick. `--old` is a checkout of the commit before the results feature (8b6071c^) with its own
.venv (.ci/setup); `--quick` is 2 hosts x 10 jobs, for a look. The full run takes about 45
minutes on 2 cores at --rounds 3 (a tick over 1,008 jobs takes seconds: the simulated hosts'
probe scripts share the 2 cores with the jobs). Writes bench/results/live_metrics.json
(live_metrics-HOSTSxJOBS.json for another shape, --quick's included).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
RESULTS = HERE.parent / "results"
PROTOCOL = "LIVE-BENCH "  # the worker's lines to the orchestrator start with this
# light on purpose: 1,000 of these run at once on a 2-core box (a shell loop, no interpreter)
JOB_CMD = ('i=0; while :; do i=$((i+1)); '
           'echo "step=$i loss=0.$((900 - i % 800)) val_acc=0.$((100 + i % 800))"; '
           'sleep 1; done')
METRIC_LINE = re.compile(r"^step=\d+ loss=0\.\d+ val_acc=0\.\d+$")
LAUNCH_DEADLINE_S = 1800.0
SETTLE_DEADLINE_S = 300.0
GONE_DEADLINE_S = 300.0


# ---- shared ---------------------------------------------------------------------------------

def quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": statistics.median(ordered) * 1000,
            "p95_ms": ordered[int(0.95 * (len(ordered) - 1))] * 1000}


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy (user + nice + system), from /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return sum(int(x) for x in fields[:3]) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---- the worker: one engine of one checkout -------------------------------------------------

def manifest_text(config: dict[str, Any]) -> str:
    per_host = int(config["jobs_per_host"])
    work = config["work"]
    hosts = "\n".join(f"  - {{name: {n}, ssh: {n}, max_parallel: {per_host}, "
                      f"log_dir: {work}/logs/{config['project']}}}" for n in config["hosts"])
    total = per_host * len(config["hosts"])
    return (f"project: {config['project']}\ncwd: {work}\nhosts:\n{hosts}\n"
            # alike jobs on purpose: repeats, so the grid variable is the seed
            f"grid: {{seed: {list(range(total))}}}\n"
            f"template: {{id: 'j${{seed}}', cmd: '{JOB_CMD}'}}\n")


def say(phase: str, **fields: Any) -> None:
    print(PROTOCOL + json.dumps({"phase": phase, **fields}), flush=True)


async def hear() -> None:
    """Wait for the orchestrator's go (it counts the hosts' probe commands meanwhile)."""
    line = await asyncio.to_thread(sys.stdin.readline)
    if line.strip() != "go":
        raise SystemExit(f"live_metrics worker: expected go, read {line!r}")


def statuses(engine: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for job in engine.jobs.values():
        counts[str(job.status)] = counts.get(str(job.status), 0) + 1
    return counts


async def tick_until(engine: Any, done: Callable[[], bool], deadline_s: float,
                     what: str) -> int:
    """Tick until `done()`; returns the ticks it took."""
    started, ticks = time.monotonic(), 0
    shown: dict[str, int] = {}
    while not done():
        if time.monotonic() - started > deadline_s:
            raise SystemExit(f"live_metrics worker: {what} not reached in {deadline_s:.0f} s: "
                             f"{statuses(engine)}")
        await engine.tick()
        ticks += 1
        if statuses(engine) != shown:
            shown = statuses(engine)
            print(f"  [{engine.project}] {what}: {shown}", file=sys.stderr, flush=True)
    return ticks


def running(engine: Any) -> list[Any]:
    return [job for job in engine.jobs.values() if str(job.status) == "running"]


def last_lines_share(jobs: list[Any]) -> dict[str, float | None]:
    """Share of the jobs whose last line is a metric line; parsed by eq_tui.results where the
    checkout has it (and how long the UI's parser takes over all of them)."""
    lines = [str(job.last_line) for job in jobs]
    share: dict[str, float | None] = {
        "metric_line_share": sum(1 for x in lines if METRIC_LINE.match(x)) / max(1, len(lines)),
        "parsed_share": None, "parse_all_ms": None}
    try:
        from eq_tui.results.parse import log_numbers
    except ImportError:
        return share
    start = time.perf_counter()
    parsed = [log_numbers(line) for line in lines]
    share["parse_all_ms"] = (time.perf_counter() - start) * 1000
    wanted = {"step", "loss", "val_acc"}
    share["parsed_share"] = sum(1 for x in parsed if wanted <= set(x)) / max(1, len(lines))
    return share


def build_engine(config: dict[str, Any], scratch: Path) -> Any:
    from eq_tui.engine.engine import Engine
    from eq_tui.hosts.factory import make_hosts
    from eq_tui.manifest.loader import load_manifest_text

    manifest = load_manifest_text(manifest_text(config), f"{scratch}/m.yaml")
    if "ssh_config" in inspect.signature(make_hosts).parameters:
        hosts = make_hosts(manifest, scratch, ssh_config=config["ssh_config"])
    else:  # before the results feature: the ssh config came from the environment
        os.environ["EQ_TUI_SSH_CONFIG"] = config["ssh_config"]
        hosts = make_hosts(manifest, scratch)
    return Engine(manifest, scratch / "run", hosts)


async def timed_ticks(engine: Any, ticks: int) -> dict[str, Any]:
    before = dict(engine.probes_by_host)
    cpu = own_cpu_s()
    samples, rtts = [], []
    for _ in range(ticks):
        start = time.perf_counter()
        await engine.tick()
        samples.append(time.perf_counter() - start)
        # the slowest host's probe round trip this tick (the tick waits for every host)
        rtts.append(max(snap.rtt_s or 0.0 for snap in engine.snapshots.values()))
    return {"tick_s": samples, "slowest_probe_rtt_s": rtts,
            "engine_cpu_s": own_cpu_s() - cpu,
            "probes_by_host": {name: count - before.get(name, 0)
                               for name, count in engine.probes_by_host.items()}}


def sessions_gone(engine: Any) -> bool:
    """No job of ours runs and every host's probe lists no session of ours."""
    snaps = engine.snapshots
    return (not any(str(j.status) in ("running", "launching") for j in engine.jobs.values())
            and len(snaps) == len(engine.hosts)
            and all(snap.ok and not snap.sessions for snap in snaps.values()))


async def worker_async(config: dict[str, Any]) -> dict[str, Any]:
    total = int(config["jobs_per_host"]) * len(config["hosts"])
    with tempfile.TemporaryDirectory() as scratch:
        engine = build_engine(config, Path(scratch))
        await engine.start(preflight=False)
        try:
            started = time.monotonic()
            launch_ticks = await tick_until(engine, lambda: len(running(engine)) == total,
                                            LAUNCH_DEADLINE_S, "launching")
            launch_s = time.monotonic() - started
            paused = await engine.command("pause")
            if not paused["ok"]:
                raise SystemExit(f"live_metrics worker: pause refused: {paused['error']}")
            await tick_until(engine, lambda: all(METRIC_LINE.match(str(j.last_line))
                                                 for j in running(engine)),
                             SETTLE_DEADLINE_S, "a metric line from every job")
            say("ready", running=len(running(engine)))
            await hear()
            timed = await timed_ticks(engine, int(config["ticks"]))
            jobs = running(engine)
            say("timed", running_jobs=len(jobs), launch_ticks=launch_ticks, launch_s=launch_s,
                **timed, **last_lines_share(jobs))
            # meanwhile the orchestrator ends every job's session: the engine's own kill does
            # them one at a time (1,000 kill.sh, each a `ps -e` of a loaded box: many minutes)
            await hear()
            end_ticks = await tick_until(engine, lambda: sessions_gone(engine),
                                         GONE_DEADLINE_S, "sessions gone")
        finally:
            await engine.stop()
            await engine.run()
    import eq_tui

    return {"eq_tui": str(Path(eq_tui.__file__).resolve().parent), "end_ticks": end_ticks,
            "engine_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def worker(config: dict[str, Any]) -> None:
    checkout = str(Path(config["checkout"]).resolve())
    sys.path.insert(0, checkout)  # this checkout's eq_tui, never the bench's own
    import eq_tui

    if not Path(eq_tui.__file__).resolve().is_relative_to(checkout):
        raise SystemExit(f"live_metrics worker: imported {eq_tui.__file__}, not {checkout}'s")
    say("result", **asyncio.run(worker_async(config)))


# ---- the orchestrator: one bed, workers interleaved -----------------------------------------

def bed_processes(marker: bytes) -> int:
    """Processes started for the bed's hosts (their environment carries the bed's marker)."""
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    count += 1
    return count


def memory_now(marker: bytes) -> dict[str, float]:
    """The machine's memory in use (total - available) and the bed's processes' share."""
    info = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, value = line.split(":", 1)
        info[key] = int(value.split()[0]) / 1024 / 1024
    rss_kb, count = 0, 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    status = (entry / "status").read_text()
                    rss_kb += int(status.split("VmRSS:", 1)[1].split()[0])
                    count += 1
    return {"machine_used_gib": info["MemTotal"] - info["MemAvailable"],
            "machine_total_gib": info["MemTotal"], "bed_processes": count,
            "bed_rss_gib": rss_kb / 1024 / 1024, "load_1min": os.getloadavg()[0]}


def probe_commands(bed: Any) -> dict[str, int]:
    return {name: len(host.commands("probe.sh")) for name, host in bed.hosts.items()}


def end_sessions(marker: bytes, project: str) -> int:
    """SIGTERM every screen session of the project's jobs on the bed (screen hangs up on its
    window: the job, its wrapper and tee end). Returns how many."""
    ended = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if (argv[0] == b"SCREEN" and f"eq_{project}_".encode() in b" ".join(argv)
                        and marker in (entry / "environ").read_bytes().split(b"\0")):
                    os.kill(int(entry.name), signal.SIGTERM)
                    ended += 1
    return ended


def wait_bed_idle(marker: bytes) -> None:
    """After a worker: every job, session and per-connection shell of the bed is gone."""
    deadline = time.monotonic() + GONE_DEADLINE_S
    while (left := bed_processes(marker)) > 0:
        if time.monotonic() > deadline:
            raise SystemExit(f"live_metrics: {left} processes of the bed still there")
        time.sleep(0.2)


def next_message(stdout: IO[str]) -> dict[str, Any]:
    for line in stdout:
        if line.startswith(PROTOCOL):
            message: dict[str, Any] = json.loads(line[len(PROTOCOL):])
            return message
        sys.stderr.write(line)
    raise SystemExit("live_metrics: the worker ended without its result")


def expect(stdout: IO[str], phase: str) -> dict[str, Any]:
    message = next_message(stdout)
    if message.get("phase") != phase:
        raise SystemExit(f"live_metrics: expected {phase} from the worker, got {message}")
    return message


def go(stdin: IO[str]) -> None:
    stdin.write("go\n")
    stdin.flush()


def run_worker(bed: Any, checkout: Path, label: str, round_n: int,
               args: argparse.Namespace) -> dict[str, Any]:
    config = {"checkout": str(checkout), "ssh_config": str(bed.ssh_config),
              "hosts": sorted(bed.hosts), "work": str(bed.work),
              "jobs_per_host": args.jobs_per_host, "ticks": args.ticks,
              "project": f"live{label}{round_n}"}
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    marker = f"EQ_BED={bed.root}".encode()
    with subprocess.Popen([str(checkout / ".venv/bin/python"), str(HERE), "--worker",
                           json.dumps(config)], cwd=checkout, env=env, text=True,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        expect(proc.stdout, "ready")
        memory = memory_now(marker)
        before, cpu_before, t0 = probe_commands(bed), machine_cpu_s(), time.monotonic()
        go(proc.stdin)
        timed = expect(proc.stdout, "timed")
        after, cpu, wall = probe_commands(bed), machine_cpu_s() - cpu_before, time.monotonic() - t0
        ended = end_sessions(marker, str(config["project"]))
        go(proc.stdin)
        result = {**timed, **expect(proc.stdout, "result"), "sessions_ended": ended}
        result.pop("phase")
    if proc.returncode != 0:
        raise SystemExit(f"live_metrics: the {label} worker exited {proc.returncode}")
    wait_bed_idle(marker)
    server = {name: after[name] - before[name] for name in after}
    engine = result["probes_by_host"]
    return {"checkout": label, "path": str(checkout), "round": round_n, **result,
            **quantiles(result["tick_s"]), **memory,
            "probe_commands_by_host": server,
            # server-side probe commands per probe the engine made of that host (the worst
            # host): exactly 1.0 is one round trip per host per tick
            "probe_commands_per_host_tick": max(server[n] / max(1, engine.get(n, 0))
                                                for n in server),
            "probe_commands_per_tick_max": max(server.values()) / args.ticks,
            "slowest_probe_rtt_median_ms": statistics.median(result["slowest_probe_rtt_s"]) * 1000,
            "engine_cpu_ms_per_tick": result["engine_cpu_s"] / args.ticks * 1000,
            "machine_busy_share": cpu / (wall * (os.cpu_count() or 1))}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def median_of(label: str, key: str) -> float:
        return statistics.median(r[key] for r in rows if r["checkout"] == label)

    old = {r["round"]: r for r in rows if r["checkout"] == "old"}
    new = [r for r in rows if r["checkout"] == "new"]
    return {"old_median_ms": median_of("old", "median_ms"),
            "new_median_ms": median_of("new", "median_ms"),
            "ratio_new_old": median_of("new", "median_ms") / median_of("old", "median_ms"),
            # each round's new against the old that ran just before it: the spread is the noise
            "round_ratios": [r["median_ms"] / old[r["round"]]["median_ms"] for r in new
                             if r["round"] in old],
            # the engine's own CPU per tick (the tick's wall time is mostly the hosts' probes)
            "old_engine_cpu_ms": median_of("old", "engine_cpu_ms_per_tick"),
            "new_engine_cpu_ms": median_of("new", "engine_cpu_ms_per_tick"),
            "probe_commands_per_host_tick": max(r["probe_commands_per_host_tick"]
                                                for r in rows),
            "new_parsed_share": min(r["parsed_share"] for r in new),
            "new_parse_all_ms": statistics.median(r["parse_all_ms"] for r in new),
            "running_jobs": min(r["running_jobs"] for r in rows),
            "machine_used_gib_max": max(r["machine_used_gib"] for r in rows),
            "bed_rss_gib_max": max(r["bed_rss_gib"] for r in rows)}


def report(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    print(f"{'checkout':>8} {'round':>5} {'running':>8} {'tick median ms':>15} {'p95 ms':>8} "
          f"{'probes/host/tick':>17} {'slowest probe ms':>17} {'engine CPU ms':>14} "
          f"{'busy':>5} {'mem GiB':>8}")
    for r in rows:
        print(f"{r['checkout']:>8} {r['round']:>5} {r['running_jobs']:>8} "
              f"{r['median_ms']:>15.1f} {r['p95_ms']:>8.1f} "
              f"{r['probe_commands_per_host_tick']:>17.2f} "
              f"{r['slowest_probe_rtt_median_ms']:>17.1f} {r['engine_cpu_ms_per_tick']:>14.1f} "
              f"{r['machine_busy_share']:>5.0%} {r['machine_used_gib']:>8.1f}")
    print(f"tick median (median over rounds): old {summary['old_median_ms']:.1f} ms, "
          f"new {summary['new_median_ms']:.1f} ms, ratio new/old "
          f"{summary['ratio_new_old']:.3f} (per round: "
          f"{', '.join(f'{x:.2f}' for x in summary['round_ratios'])})")
    print(f"engine CPU per tick (median over rounds): old {summary['old_engine_cpu_ms']:.1f} ms, "
          f"new {summary['new_engine_cpu_ms']:.1f} ms")
    print(f"probe round trips per host per tick (server-side, worst host): "
          f"{summary['probe_commands_per_host_tick']:.2f}")
    print(f"running jobs whose last line parsed as metrics on new: "
          f"{summary['new_parsed_share']:.1%} (all {summary['running_jobs']} parsed in "
          f"{summary['new_parse_all_ms']:.1f} ms)")
    print(f"memory: machine in use at most {summary['machine_used_gib_max']:.1f} GiB (the bed's "
          f"processes' resident sizes add up to {summary['bed_rss_gib_max']:.1f} GiB, shared "
          "pages counted in every process that maps them)")


def write_results(args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs so far (after each worker: a later failure keeps them) and, once both
    checkouts ran, the summary."""
    both = {r["checkout"] for r in rows} == {"old", "new"}
    summary = summarise(rows) if both else {}
    RESULTS.mkdir(exist_ok=True)
    shape = (args.hosts, args.jobs_per_host)
    name = "live_metrics.json" if shape == (16, 63) else "live_metrics-{}x{}.json".format(*shape)
    config = {k: v for k, v in vars(args).items() if k != "worker"}
    (RESULTS / name).write_text(json.dumps({"config": config, "summary": summary,
                                            "runs": rows}, indent=1))
    return summary


def orchestrate(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO))
    from tests.support.sshbed import SshBed

    checkouts = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    for label, path in checkouts.items():
        if not (path / ".venv/bin/python").exists():
            raise SystemExit(f"live_metrics: {label} checkout {path} has no .venv (.ci/setup)")
    bed = SshBed.create([(f"m{i:02d}", args.jobs_per_host, 81920, "NVIDIA H100 80GB (sim)")
                         for i in range(args.hosts)])
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    try:
        for round_n in range(1, args.rounds + 1):
            for label in ("old", "new"):
                print(f"round {round_n}: {label} ({checkouts[label]})", file=sys.stderr,
                      flush=True)
                rows.append(run_worker(bed, checkouts[label], label, round_n, args))
                summary = write_results(args, rows)
    finally:
        bed.close()
    if summary:
        report(rows, summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="old/new pairs, interleaved")
    parser.add_argument("--ticks", type=int, default=None, help="timed ticks (default 30)")
    parser.add_argument("--hosts", type=int, default=None, help="sshd hosts (default 16)")
    parser.add_argument("--jobs-per-host", type=int, default=None,
                        help="running jobs per host, one per simulated GPU (default 63)")
    parser.add_argument("--old", default="/work/pre-results",
                        help="checkout of the commit before the results feature, with .venv")
    parser.add_argument("--new", default=str(REPO), help="checkout to compare (this one)")
    parser.add_argument("--quick", action="store_true", help="2 hosts x 10 jobs: a look")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    args.hosts = args.hosts or (2 if args.quick else 16)
    args.jobs_per_host = args.jobs_per_host or (10 if args.quick else 63)
    args.ticks = args.ticks or (10 if args.quick else 30)
    orchestrate(args)


if __name__ == "__main__":
    main()
