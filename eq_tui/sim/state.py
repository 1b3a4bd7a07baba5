"""Set up and inspect a simulated-GPU state directory (stdlib only).

The directory is what `$EQ_SIM_STATE` names for the sim's `nvidia-smi` and `fake-train`
(in `sim_bin_dir()`); see `bin/_simcore.py` for its layout.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Quirk = Literal["na", "not_supported", "empty", "fail"]
QUIRKS: tuple[str, ...] = ("na", "not_supported", "empty", "fail")
CONFIG = "config.json"
RUNS = "runs.jsonl"


@dataclass(frozen=True)
class RunInterval:
    """One fake-train attempt that held memory on `gpu` from `start` to `end` (its exit), and
    until `released` when its memory lingered. A job on several GPUs has one per GPU."""

    job: str
    attempt: int
    pid: int
    gpu: int
    start: float
    end: float
    released: float
    exit: int | None


def _config_path(state_dir: str | os.PathLike[str]) -> Path:
    return Path(state_dir) / CONFIG


def _write_config(state_dir: str | os.PathLike[str], config: Mapping[str, Any]) -> None:
    path = _config_path(state_dir)
    tmp = path.with_name(f".{CONFIG}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(config, indent=2))
    os.replace(tmp, path)


def _read_config(state_dir: str | os.PathLike[str]) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(_config_path(state_dir).read_text())
    return config


def _check_quirk(quirk: str | None) -> None:
    if quirk is not None and quirk not in QUIRKS:
        raise ValueError(f"unknown quirk {quirk!r}; expected one of {QUIRKS} or None")


def _foreign_list(foreign: Iterable[Mapping[str, int]]) -> list[dict[str, int]]:
    return [{"gpu": int(f["gpu"]), "mib": int(f["mib"])} for f in foreign]


def init_sim_state(
    state_dir: str | os.PathLike[str],
    *,
    host: str,
    gpus: int,
    memory_mib: int,
    model: str = "NVIDIA Simulated GPU",
    linger_s: float = 0.0,
    base_mib: int = 0,
    quirk: Quirk | None = None,
    foreign: Iterable[Mapping[str, int]] = (),
    keep_faults: bool = False,
    idle_w: float = 60.0,
    busy_w: float = 300.0,
) -> Path:
    """Create (or reset the config of) a state directory; returns it as a Path.

    With keep_faults, an existing directory keeps its injected quirk and foreign memory (an
    engine restarting on it must not wipe what a test or the chaos suite set up)."""
    _check_quirk(quirk)
    root = Path(state_dir)
    (root / "procs").mkdir(parents=True, exist_ok=True)
    config = {
        "host": host, "gpus": gpus, "memory_mib": memory_mib, "model": model,
        "linger_s": linger_s, "base_mib": base_mib, "quirk": quirk,
        "foreign": _foreign_list(foreign), "idle_w": idle_w, "busy_w": busy_w,
    }
    if keep_faults and _config_path(root).exists():
        try:
            previous = _read_config(root)
        except (OSError, ValueError):
            previous = {}
        config["quirk"] = previous.get("quirk")
        config["foreign"] = previous.get("foreign") or []
        for key in ("ecc", "pending_pages", "vanished", "no_power", "idle_w", "busy_w"):
            if previous.get(key):
                config[key] = previous[key]
    _write_config(root, config)
    return root


def set_quirk(state_dir: str | os.PathLike[str], quirk: Quirk | None) -> None:
    _check_quirk(quirk)
    config = _read_config(state_dir)
    config["quirk"] = quirk
    _write_config(state_dir, config)


def set_foreign(state_dir: str | os.PathLike[str], foreign: Iterable[Mapping[str, int]]) -> None:
    """Memory held by someone else's processes: [{"gpu": index, "mib": amount}, ...]."""
    config = _read_config(state_dir)
    config["foreign"] = _foreign_list(foreign)
    _write_config(state_dir, config)


def set_gpu_health(state_dir: str | os.PathLike[str], *, ecc: Mapping[int, int] | None = None,
                   pending_pages: Iterable[int] | None = None,
                   vanished: Iterable[int] | None = None) -> None:
    """Inject GPU faults: uncorrected ECC error counts, retired pages pending, GPUs that fell
    off the bus (no longer listed). An argument left None keeps what is there."""
    config = _read_config(state_dir)
    if ecc is not None:
        config["ecc"] = {str(gpu): int(count) for gpu, count in ecc.items()}
    if pending_pages is not None:
        config["pending_pages"] = sorted(int(gpu) for gpu in pending_pages)
    if vanished is not None:
        config["vanished"] = sorted(int(gpu) for gpu in vanished)
    _write_config(state_dir, config)


def set_power(state_dir: str | os.PathLike[str], *, idle_w: float | None = None,
              busy_w: float | None = None, reading: bool = True) -> None:
    """The simulated cards' power model (watts idle and at 100 %), or no power reading at all
    (`reading=False`: power.draw reads [N/A])."""
    config = _read_config(state_dir)
    if idle_w is not None:
        config["idle_w"] = idle_w
    if busy_w is not None:
        config["busy_w"] = busy_w
    config["no_power"] = not reading
    _write_config(state_dir, config)


def hold_memory(state_dir: str | os.PathLike[str], pid: int, gpu: int, mib: int) -> None:
    """Make a running process (e.g. someone else's) hold `mib` on a sim GPU until it exits
    (called once per GPU for a process on several)."""
    path = Path(state_dir) / "procs" / f"{pid}-{gpu}.json"  # bin/_simcore.py record_path
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"pid": pid, "gpu": gpu, "mib": mib, "linger_until": None}))
    os.replace(tmp, path)


def read_runs(state_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every start/end/oom event fake-train appended, in order."""
    path = Path(state_dir) / RUNS
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def run_intervals(runs: Iterable[Mapping[str, Any]],
                  unmatched_end: float = math.inf) -> list[RunInterval]:
    """Pair start and end events by pid, an interval per GPU the start names. A start with no
    end yet (still running, or killed by someone with SIGKILL) lasts until `unmatched_end`."""
    open_starts: dict[int, Mapping[str, Any]] = {}
    intervals: list[RunInterval] = []

    def close(start: Mapping[str, Any], end: float, released: float, code: int | None) -> None:
        for gpu in start.get("gpus") or [start["gpu"]]:
            intervals.append(RunInterval(
                job=str(start["job"]), attempt=int(start["attempt"]), pid=int(start["pid"]),
                gpu=int(gpu), start=float(start["t"]), end=end, released=released, exit=code))

    for event in runs:
        kind, pid = event.get("event"), int(event.get("pid", -1))
        if kind == "start":
            open_starts[pid] = event
        elif kind == "end" and pid in open_starts:
            end = float(event["t"])
            linger_until = event.get("linger_until")
            released = max(end, float(linger_until)) if linger_until is not None else end
            close(open_starts.pop(pid), end, released, event.get("exit"))
    for start in open_starts.values():
        close(start, unmatched_end, unmatched_end, None)
    return sorted(intervals, key=lambda r: (r.gpu, r.start))


def find_overlaps(
    runs: Iterable[Mapping[str, Any]],
    *,
    include_linger: bool = False,
    unmatched_end: float = math.inf,
) -> list[tuple[RunInterval, RunInterval]]:
    """Pairs of attempts whose [start, end] on the same GPU overlap. With include_linger, an
    attempt lasts until its memory was released — a job started on a GPU whose previous
    memory was still lingering counts as an overlap."""
    intervals = run_intervals(runs, unmatched_end)
    overlaps: list[tuple[RunInterval, RunInterval]] = []
    for i, a in enumerate(intervals):
        a_end = a.released if include_linger else a.end
        for b in intervals[i + 1:]:
            if b.gpu != a.gpu:
                break
            if b.start < a_end:
                overlaps.append((a, b))
    return overlaps


def _power_model(state_dir: str | os.PathLike[str]) -> tuple[float, float]:
    try:
        config = _read_config(state_dir)
    except (OSError, ValueError):
        config = {}
    return float(config.get("idle_w", 60.0)), float(config.get("busy_w", 300.0))


def energy_split(state_dir: str | os.PathLike[str], gpu: int, t0: float,
                 t1: float) -> tuple[float, dict[tuple[str, int], float]]:
    """The sim's own energy figures for one GPU over [t0, t1], from its power model and the
    runs its fake-train jobs recorded: the card's joules (the stand-in of NVML's total-energy
    counter, read as a difference) and each attempt's (job, attempt) part by its own
    utilisation (90 + pid % 10 while it runs, as `nvidia-smi pmon` reports it)."""
    idle, busy = _power_model(state_dir)
    events = read_runs(state_dir)
    set_util = {int(e["pid"]): int(e["util"]) for e in events
                if e.get("event") == "start" and e.get("util") is not None}
    runs = [r for r in run_intervals(events, unmatched_end=t1) if r.gpu == gpu]
    cuts = sorted({t0, t1, *(t for r in runs for t in (r.start, r.end) if t0 < t < t1)})

    def own(run: RunInterval) -> int:  # _simcore.process_utilization
        return set_util.get(run.pid, 90 + run.pid % 10)

    card = 0.0
    parts: dict[tuple[str, int], float] = {}
    for a, b in itertools.pairwise(cuts):
        on = [r for r in runs if r.start <= a and r.end >= b]
        busy_pids = [r.pid for r in on if r.pid not in set_util]
        # _simcore.utilization: the lowest busy pid's, else the highest set one
        util = 90 + min(busy_pids) % 10 if busy_pids else max(map(own, on), default=0)
        joules = (idle + (busy - idle) * util / 100.0) * (b - a)
        card += joules
        total = sum(map(own, on))
        for r in on:
            key = (r.job, r.attempt)
            parts[key] = parts.get(key, 0.0) + (joules * own(r) / total if total else 0.0)
    return card, parts


def sim_bin_dir() -> Path:
    """Directory holding the sim's `nvidia-smi` and `fake-train` (put it first on PATH).

    Wheels do not always keep the executable bit on package data, so it is restored here."""
    bin_dir = Path(__file__).resolve().parent / "bin"
    for name in ("nvidia-smi", "fake-train"):
        exe = bin_dir / name
        if exe.exists() and not os.access(exe, os.X_OK):
            with contextlib.suppress(OSError):
                exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir
