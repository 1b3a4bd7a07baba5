"""Every performance figure of eq-tui in one run: a table of figures against their targets,
and the same as JSON so two commits can be compared.

    .venv/bin/python bench/all.py [--quick] [--only NAME,...] [--compare OLD.json]

Runs (names for --only):
  rolling    the reference sweep (64 jobs of 5-30 s, 2 sshd hosts x 4 simulated GPUs, memory
             lingering 1-3 s, some CUDA OOM retries), default settings: reuse gap, makespan
             against a zero-overhead replay of the same schedule
  strict     the same sweep with `waves: strict`
  poll60     the same sweep probed every 60 s with no watcher: how today's polling scripts
             run it
  hosts16    2 jobs of 5-30 s per GPU on 16 sshd hosts x 4 GPUs: reuse gap at scale
  scale      scheduler decision cost at 100 / 1,000 / 10,000 jobs (16 hosts x 8 GPUs), and a
             whole engine with 10,000 jobs (RSS, state written per tick)
  ui         a UI tick with 5,000 jobs (50 changed), first frame, `eq-tui --help`
  eta        the first ETA's error at 20 % done on a steady simulated sweep (bench/eta.py)
  search     Optuna's tpe through the engine on fake-train's smooth landscape, 8 simulated
             GPUs, 10 seeds: the median best's gap to a 216-job grid's best, and the GPU-hours
             against the grid's (bench/search.py, 5-7 minutes)
The full run takes about 27 minutes on 2 cores (poll60 alone about 8); --quick shortens the
sweeps' jobs (for a look, not for figures). Writes bench/results/all-<time>.json and
bench/results/latest.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RESULTS = Path(__file__).resolve().parent / "results"
RUNS = ("rolling", "strict", "poll60", "hosts16", "scale", "ui", "eta", "search")


@dataclass(frozen=True)
class Target:
    run: str
    key: str  # dotted path into that run's result
    label: str
    limit: float | None  # None: shown for comparison, no target
    unit: str


TARGETS = (
    Target("rolling", "gap_median_s", "reuse gap median, 2 hosts", 1.0, "s"),
    Target("rolling", "gap_p95_s", "reuse gap p95, 2 hosts", 2.0, "s"),
    Target("hosts16", "gap_median_s", "reuse gap median, 16 hosts", 1.0, "s"),
    Target("hosts16", "gap_p95_s", "reuse gap p95, 16 hosts", 2.0, "s"),
    Target("rolling", "makespan_ratio", "makespan / zero-overhead replay", 1.05, "x"),
    Target("strict", "gap_median_s", "strict waves: reuse gap median", None, "s"),
    Target("strict", "makespan_ratio", "strict waves: makespan / its zero-overhead replay",
           None, "x"),
    Target("poll60", "gap_median_s", "60 s poll, no watcher: reuse gap median", None, "s"),
    Target("poll60", "gap_p95_s", "60 s poll, no watcher: reuse gap p95", None, "s"),
    Target("rolling", "double_bookings", "GPUs given to a second job before release", 0.0,
           ""),
    Target("hosts16", "double_bookings", "GPUs given to a second job before release, 16 hosts",
           0.0, ""),
    Target("rolling", "probe_commands_per_host_tick", "probe round trips per host per tick",
           1.0, "x"),
    Target("hosts16", "probe_commands_per_host_tick",
           "probe round trips per host per tick, 16 hosts", 1.0, "x"),
    Target("scale", "decide_ms.10000.median", "decision per tick, 10,000 jobs (median)", 10.0,
           "ms"),
    Target("scale", "decide_ms.1000.median", "decision per tick, 1,000 jobs (median)", None,
           "ms"),
    Target("scale", "decide_ms.100.median", "decision per tick, 100 jobs (median)", None, "ms"),
    Target("scale", "decide_packed_ms.median",
           "decision per tick, 10,000 jobs placed by memory (median)", 10.0, "ms"),
    Target("scale", "engine.rss_mb", "engine resident memory, 10,000 jobs", 150.0, "MB"),
    Target("ui", "tick_5000_jobs_50_changed_ms", "UI tick, 5,000 jobs (50 changed)", 30.0,
           "ms"),
    Target("ui", "help_ms", "eq-tui --help", 300.0, "ms"),
    Target("eta", "sweep_eta_error_pct", "sweep's ETA error at 20 % done", 25.0, "%"),
    Target("eta", "job_first_eta_error_median_pct", "a job's first ETA error from 20 % (median)",
           25.0, "%"),
    Target("eta", "job_first_eta_error_worst_pct", "a job's first ETA error from 20 % (worst)",
           None, "%"),
    Target("eta", "undated_sweep_eta_error_pct", "sweep's ETA error at 20 %, undated (before)",
           None, "%"),
    Target("search", "gap_pct", "search: median best's gap below the full grid's best", 0.5,
           "%"),
    Target("search", "share_max", "search: GPU-hours / the grid's (the most of a seed)",
           0.30, "x"),
    Target("search", "share_median", "search: GPU-hours / the grid's (median)", None, "x"),
)


def lookup(data: Any, dotted: str) -> float | None:
    for part in dotted.split("."):
        if isinstance(data, dict) and part in data:
            data = data[part]
        else:
            return None
    return float(data) if isinstance(data, int | float) else None


def sweep(**kwargs: Any) -> Callable[[bool], dict[str, Any]]:
    def run(quick: bool) -> dict[str, Any]:
        from bench.reuse_gap import SweepConfig, describe, run_sweep

        result = run_sweep(SweepConfig(quick=quick, **kwargs))
        print("  " + describe(result), flush=True)
        return result
    return run


def scale(quick: bool) -> dict[str, Any]:
    from bench import scale as scale_bench

    result: dict[str, Any] = scale_bench.run(quick)
    return result


def ui(quick: bool) -> dict[str, Any]:
    from bench import ui as ui_bench

    return dict(ui_bench.run())


def eta(quick: bool) -> dict[str, Any]:
    from bench import eta as eta_bench

    result = eta_bench.run(quick)
    print("  " + eta_bench.describe(result), flush=True)
    return result


def search(quick: bool) -> dict[str, Any]:
    from bench import search as search_bench

    result = search_bench.run(quick)
    print("  " + search_bench.describe(result), flush=True)
    return result


RUNNERS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "rolling": sweep(),
    "strict": sweep(waves="strict"),
    "poll60": sweep(poll=60.0, watch=False),
    "hosts16": sweep(sweep="gap", hosts=16),
    "scale": scale,
    "ui": ui,
    "eta": eta,
    "search": search,
}


def machine() -> dict[str, Any]:
    import os

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=Path(__file__).parent, check=False).stdout.strip()
    except OSError:
        commit = ""
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"commit": commit, "cpus": os.cpu_count(), "memory_gib": round(memory_gib, 1),
            "python": platform.python_version(), "platform": platform.platform(),
            "at": time.strftime("%Y-%m-%d %H:%M:%S")}


def table(results: dict[str, Any], old: dict[str, Any] | None) -> str:
    rows = []
    header = f"{'figure':<52} {'value':>10} {'target':>9} {'ratio':>7}  {'met':<4}"
    # value column: 7 digits, a space and a 2-letter unit = 10
    if old is not None:
        header += f" {'before':>10} {'now/before':>10}"
    rows.append(header)
    rows.append("-" * len(header))
    for target in TARGETS:
        value = lookup(results.get(target.run), target.key)
        if value is None:
            continue
        limit = f"{target.limit:g} {target.unit}" if target.limit is not None else "-"
        ratio = f"{value / target.limit:.2f}" if target.limit else "-"
        met = "-" if target.limit is None else ("yes" if value <= target.limit else "NO")
        line = f"{target.label:<52} {value:>7.2f} {target.unit:<2} {limit:>9} {ratio:>7}  {met:<4}"
        if old is not None:
            before = lookup(old.get("results", {}).get(target.run), target.key)
            if before is not None:
                change = f"{value / before:.2f}" if before else "-"
                line += f" {before:>10.2f} {change:>10}"
        rows.append(line)
    return "\n".join(rows)


def comparisons(results: dict[str, Any]) -> list[str]:
    lines = []
    base = results.get("rolling")
    if not base:
        return lines
    for name, what in (("strict", "strict waves"), ("poll60", "a 60 s poll with no watcher")):
        other = results.get(name)
        if other:
            lines.append(
                f"{what}: makespan {other['makespan_s']:.0f} s = "
                f"{other['makespan_s'] / base['makespan_s']:.2f}x rolling's "
                f"{base['makespan_s']:.0f} s; reuse gap median {other['gap_median_s']:.2f} s "
                f"vs {base['gap_median_s']:.2f} s")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="shorter sweeps: a look only")
    parser.add_argument("--only", default=",".join(RUNS),
                        help=f"comma-separated subset of {', '.join(RUNS)}")
    parser.add_argument("--compare", type=Path, metavar="OLD.json",
                        help="an earlier bench/results/all-*.json to compare against")
    args = parser.parse_args()
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in RUNNERS]
    if unknown:
        parser.error(f"unknown run(s): {', '.join(unknown)} (choose from {', '.join(RUNS)})")
    old = json.loads(args.compare.read_text()) if args.compare else None
    report: dict[str, Any] = {"machine": machine(), "quick": args.quick, "results": {}}
    for name in chosen:
        print(f"[{name}] running...", flush=True)
        started = time.monotonic()
        report["results"][name] = RUNNERS[name](args.quick)
        print(f"[{name}] done in {time.monotonic() - started:.0f} s", flush=True)
    info = report["machine"]
    print(f"\neq-tui {info['commit']} on {info['cpus']} CPUs, {info['memory_gib']} GiB, "
          f"Python {info['python']}{' (QUICK: not figures)' if args.quick else ''}")
    print(table(report["results"], old))
    for line in comparisons(report["results"]):
        print(line)
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    text = json.dumps(report, indent=1)
    (RESULTS / f"all-{stamp}.json").write_text(text)
    (RESULTS / "latest.json").write_text(text)
    print(f"\nwritten: {RESULTS / f'all-{stamp}.json'}")


if __name__ == "__main__":
    main()
