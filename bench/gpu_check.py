"""A real-GPU check the project keeps: small real CUDA jobs through eq-tui, and what
nvidia-smi itself saw beside what eq-tui recorded.

    python bench/gpu_check.py [--quick] [--gpu 0] [--json PATH] [--keep] [--via-smi]
    .venv/bin/python bench/gpu_check.py --sim [--quick]      # the same harness, simulated GPU

Seven `eq-tui MANIFEST --no-ui` runs, one after another, on one GPU of this machine (host
`local`, `launcher: tmux`, manifests in a temporary work dir), while a sampler reads
`nvidia-smi --query-gpu` and `--query-compute-apps` about every 0.15 s:

  packed      6 jobs of ~12 GiB computing ~20 s with `mem_mib`: most at once, peak per job
  oom         a CUDA OOM on the first attempt only, and one asking 200 GiB: attempts, status
  hang        2 GiB held silently (`stall_after: 20s`, `on_stall: kill`) beside a job computing
              90 s: from its last log line to job_stalled and to the kill
  leak        a job leaving a `setsid` child holding 2 GiB: eq-tui's cleanup, memory freed
  kill        `eq-tui kill RUN_DIR JOB` while it computes: memory freed, how long after
  sequential  3 whole-card jobs without `mem_mib`: the reuse gap, memory released -> next job
  energy      one job alone: eq-tui's energy figure against NVML's counter and 10 Hz power.draw
              (bench/gpu_check_energy.py)

After the runs the card's process list must hold nothing of ours. Prints a table and writes
bench/results/gpu_check-<time>.json (card, driver, torch, eq-tui commit, every figure). Exits 0
when every check passed, 1 when one failed, 2 when there is no NVIDIA GPU or no torch (or the
GPU is busy). `--sim` runs the same harness on eq-tui's simulated GPU with fake-train jobs: it
exercises the harness, its figures are the simulator's, not a GPU's. `--via-smi` hides NVML
from eq-tui, so it reads the card as it reads an SSH host's: nvidia-smi in the probe (pmon for
each job's own activity) and in the watcher, and the next whole-card job placed while the last
one's memory drains waits for it on the host. See docs/gpu_check.md.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gpu_check_harness import (
    CSV,
    SIM_MEMORY_MIB,
    SIM_MODEL,
    Jobs,
    Sampler,
    Section,
    SimJobs,
    TorchJobs,
    process_owner,
    smi,
)
from bench.gpu_check_scenarios import RUNS, Bench, Config

RESULTS = Path(__file__).resolve().parent / "results"
TORCH_PROBE = ("import json, torch; ok = torch.cuda.is_available(); print(json.dumps("
               "{'torch': torch.__version__, 'cuda': torch.version.cuda, 'available': ok}))")


class Unusable(Exception):
    """No GPU to check on: exit 2 with this message."""


def torch_info() -> dict[str, Any]:
    """torch's version and whether it sees CUDA, asked of the python that will run the jobs."""
    try:
        probe = subprocess.run([sys.executable, "-c", TORCH_PROBE], capture_output=True,
                               text=True, timeout=180, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unusable(f"no torch for {sys.executable} ({exc})") from None
    try:
        found: dict[str, Any] = json.loads(probe.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        said = probe.stderr.strip().splitlines()
        raise Unusable(f"no torch for {sys.executable} (`import torch`: "
                       f"{said[-1] if said else 'no output'})") from None
    return found


def gpu_machine(gpu: int) -> dict[str, Any]:
    """The card and the torch that will run the jobs; Unusable when either is missing."""
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unusable(f"no NVIDIA GPU: nvidia-smi -L failed ({exc})") from None
    if listed.returncode != 0 or "GPU " not in listed.stdout:
        raise Unusable("no NVIDIA GPU: nvidia-smi -L listed none "
                       f"({(listed.stdout + listed.stderr).strip()[:200] or 'no output'})")
    found = torch_info()
    if not found["available"]:
        raise Unusable(f"torch {found['torch']} sees no CUDA device (torch.cuda.is_available() "
                       "is False)")
    rows = smi(["nvidia-smi"], ["--query-gpu=index,name,memory.total,memory.used,"
                                "driver_version", CSV], None)
    card = next((r for r in rows if r and r[0] == str(gpu)), None)
    if card is None:
        raise Unusable(f"no GPU {gpu} here: nvidia-smi lists {len(rows)}")
    if int(card[3]) > 1024:
        raise Unusable(f"GPU {gpu} is in use ({card[3]} MiB): the figures need it idle; "
                       "pick another with --gpu")
    return {"mode": "gpu", "gpu": gpu, "card": card[1], "memory_total_mib": int(card[2]),
            "driver": card[4], "torch": found["torch"], "cuda": found["cuda"]}


def sim_machine() -> dict[str, Any]:
    return {"mode": "sim", "gpu": 0, "card": SIM_MODEL, "memory_total_mib": SIM_MEMORY_MIB,
            "driver": "simulated (eq_tui/sim)", "torch": None, "cuda": None}


def commit() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=Path(__file__).parent, check=False)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, cwd=Path(__file__).parent,
                               check=False)
    except OSError:
        return ""
    return done.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def leftovers(sampler: Sampler, jobs: Jobs, run_dirs: list[Path]) -> list[dict[str, Any]]:
    """GPU processes of ours once every run has ended (one reading per GPU state), ended here
    after being counted so the card is left clean."""
    time.sleep(2.0)
    ours = {p for p, o in sampler.owners.items() if o and o.project.startswith("gpucheck_")}
    # each simulated run has a GPU of its own; a real one is the same card every time
    envs = [jobs.sampler_env(d) for d in run_dirs] if jobs.mode == "sim" else [None]
    found: list[dict[str, Any]] = []
    for env in envs:
        sample = sampler.read(env)
        for app in sample.apps if sample else ():
            owner = process_owner(app.pid)
            if app.pid in ours or (owner and owner.project.startswith("gpucheck_")):
                found.append({"pid": app.pid, "mib": app.mib,
                              "job": owner.job if owner else None})
    for entry in found:
        with contextlib.suppress(OSError):
            os.kill(entry["pid"], signal.SIGKILL)
    return found


def hide_nvml_from_eq_tui(work: Path) -> None:
    """A `pynvml` that cannot be imported, first on the PYTHONPATH eq-tui and its jobs get (not
    this process's): eq-tui then takes the host for one without NVML and reads the card with
    nvidia-smi in its probe and its watcher, the path every SSH host takes."""
    shim = work / "no-nvml"
    shim.mkdir()
    (shim / "pynvml.py").write_text('raise ImportError("hidden by gpu_check --via-smi")\n')
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = f"{shim}{os.pathsep}{path}" if path else str(shim)


def table(sections: list[Section], found: list[dict[str, Any]]) -> str:
    rows = [(s.name, *row) for s in sections for row in s.rows]
    rows.append(("after", "our processes on the GPU once the runs ended", str(len(found)), "-",
                 "ok" if not found else "FAIL"))
    header = ("run", "figure", "nvidia-smi", "eq-tui's records", "check")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(5)]
    widths[1] = min(widths[1], 62)
    widths[3] = min(widths[3], 48)

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(str(c)[:w].ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(tuple("-" * w for w in widths)),
                      *(line(r) for r in rows)])


def run_all(jobs: Jobs, machine: dict[str, Any], config: Config, work: Path,
            only: list[str]) -> tuple[list[Section], list[dict[str, Any]], Sampler]:
    sampler = Sampler(jobs.smi, jobs.gpu)
    sampler.start()
    bench = Bench(jobs, sampler, work, machine["memory_total_mib"], config)
    sections = []
    try:
        for name in only:
            print(f"[{name}] running...", flush=True)
            started = time.monotonic()
            sections.append(RUNS[name](bench))
            print(f"[{name}] done in {time.monotonic() - started:.0f} s", flush=True)
    finally:
        sampler.stop()
        sampler.dump(work / "samples.jsonl")
    found = leftovers(sampler, jobs, [work / name / "run" for name in only])
    return sections, found, sampler


def report(machine: dict[str, Any], config: Config, sections: list[Section],
           found: list[dict[str, Any]], sampler: Sampler, work: Path) -> dict[str, Any]:
    periods = [b.t - a.t for a, b in itertools.pairwise(sampler.samples)]
    checks = {k: v for s in sections for k, v in s.checks.items()}
    checks["after: none of ours left on the GPU"] = not found
    return {"machine": {**machine, "eq_tui_commit": commit(), "python": platform.python_version(),
                        "host": platform.node(), "cpus": os.cpu_count(),
                        "at": time.strftime("%Y-%m-%d %H:%M:%S")},
            "quick": config.quick, "work_dir": str(work),
            "sampler": {"samples": len(sampler.samples),
                        "median_period_s": sorted(periods)[len(periods) // 2] if periods else None},
            "runs": {s.name: s.figures for s in sections}, "leftovers": found,
            "checks": checks, "passed": all(checks.values())}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shorter jobs (a look)")
    parser.add_argument("--sim", action="store_true",
                        help="eq-tui's simulated GPU and fake-train jobs instead of a real GPU")
    parser.add_argument("--gpu", type=int, default=0, help="the GPU index to use (default 0)")
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="write the figures here (default bench/results/gpu_check-<time>"
                             ".json)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (run dirs, logs)")
    parser.add_argument("--via-smi", action="store_true",
                        help="hide NVML from eq-tui: it reads the card with nvidia-smi, as it "
                             "does on an SSH host (probe, pmon, watcher, the drain wait)")
    parser.add_argument("--only", default=",".join(RUNS),
                        help=f"a comma-separated subset of {', '.join(RUNS)}")
    args = parser.parse_args(argv)
    args.only = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in args.only if n not in RUNS]
    if unknown:
        parser.error(f"unknown run(s): {', '.join(unknown)}")
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    if not args.sim and shutil.which("tmux") is None:
        print("gpu_check: tmux is needed (the runs use `launcher: tmux`)", file=sys.stderr)
        return 2
    try:
        machine = sim_machine() if args.sim else gpu_machine(args.gpu)
    except Unusable as exc:
        print(f"gpu_check: {exc}; nothing was run (use --sim for the simulated GPU)",
              file=sys.stderr)
        return 2
    jobs: Jobs = SimJobs() if args.sim else TorchJobs(args.gpu)
    config = Config(quick=args.quick)
    work = Path(tempfile.mkdtemp(prefix="eq-gpu-check-"))
    machine["eq_tui_reads_gpu_with"] = "nvidia-smi" if args.via_smi or args.sim else "NVML"
    if args.via_smi:
        hide_nvml_from_eq_tui(work)
    print(f"{machine['card']} ({machine['memory_total_mib']} MiB), driver {machine['driver']},"
          f" torch {machine['torch']}; work dir {work}", flush=True)
    try:
        sections, found, sampler = run_all(jobs, machine, config, work, args.only)
        result = report(machine, config, sections, found, sampler, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    label = "SIMULATED GPU: simulator figures, not GPU figures" if args.sim else "real GPU"
    label += f", eq-tui reads it with {machine['eq_tui_reads_gpu_with']}"
    print(f"\n{machine['card']}, driver {machine['driver']}, torch {machine['torch']}, eq-tui "
          f"{result['machine']['eq_tui_commit']} ({label}{', QUICK' if args.quick else ''})")
    print(table(sections, found))
    out = args.json or RESULTS / f"gpu_check-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    failed = [name for name, ok in result["checks"].items() if not ok]
    print(f"\n{'every check passed' if not failed else 'FAILED: ' + '; '.join(failed)}")
    print(f"written: {out}" + (f"; work dir kept: {work}" if args.keep else ""))
    return 0 if not failed else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
