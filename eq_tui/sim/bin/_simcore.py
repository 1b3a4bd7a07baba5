"""Shared state handling for the simulated nvidia-smi and fake-train (stdlib only).

Lives beside the scripts, not in the package proper, so the scripts run under any python3 on a
host without eq_tui installed: each script puts its own directory first on sys.path.

State directory layout (named by $EQ_SIM_STATE):
    config.json     {"host", "gpus", "memory_mib", "model", "linger_s", "base_mib", "quirk",
                     "foreign": [{"gpu", "mib"}], "ecc": {"0": n}, "pending_pages": [i],
                     "vanished": [i], "idle_w", "busy_w", "no_power"}
    procs/<pid>-<gpu>.json
                    what one process holds on one GPU (a process on several GPUs has a file for
                    each, so nvidia-smi lists a row per (pid, GPU) as the real one does):
                    {"pid", "gpu", "mib", ..., "linger_until": float|null, "util": int|null}.
                    Readers take pid, gpu and mib from the content, never the name, and "pid",
                    "gpu", "mib" come first (the shell nvidia-smi reads the first match of each).
                    "mib" is what the process holds now: a ramping fake-train rewrites it
                    (atomically) as it grows. A legacy procs/<pid>.json is read the same way.
    runs.jsonl      append-only start/end/oom events from fake-train; an oom with
                    "during": "ramp" follows that process's start (it had memory and was refused
                    more), one with "during": "start" is a process that never got its memory
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path

# The stand-in nvidia-smi runs on every probe: typing, collections.abc and dataclasses are
# kept off its start-up path (they cost it half its run time).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

STATE_ENV = "EQ_SIM_STATE"
DRIVER_FAILURE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)
FOREIGN_PID_BASE = 4_000_000  # fake pids of "someone else's" processes; never liveness-checked

DEFAULTS: dict[str, Any] = {
    "host": "sim",
    "gpus": 4,
    "memory_mib": 24576,
    "model": "NVIDIA Simulated GPU",
    "linger_s": 0.0,
    "base_mib": 0,
    "quirk": None,
    "foreign": [],
    "ecc": {},  # GPU index (as text) -> uncorrected ECC errors
    "pending_pages": [],  # GPU indices with retired pages pending
    "vanished": [],  # GPU indices no longer listed
    "idle_w": 60.0,  # power.draw of an idle GPU (watts)
    "busy_w": 300.0,  # ... at 100 % utilisation (linear in between)
    "no_power": False,  # a card without a power reading: power.draw is [N/A]
}


class ConfigMissing(Exception):
    pass


class ComputeApp:
    """A process holding GPU memory. alive=False: the process is gone but its memory lingers
    (or it is someone else's)."""

    __slots__ = ("alive", "foreign", "gpu", "mib", "pid", "util")

    def __init__(self, pid: int, gpu: int, mib: int, alive: bool, foreign: bool = False,
                 util: int | None = None) -> None:
        self.pid, self.gpu, self.mib, self.alive, self.foreign = pid, gpu, mib, alive, foreign
        self.util = util  # None: busy while alive; a hung process computes nothing (0)

    def __repr__(self) -> str:
        return (f"ComputeApp(pid={self.pid}, gpu={self.gpu}, mib={self.mib}, "
                f"alive={self.alive}, foreign={self.foreign})")


def load_config(state_dir: Path) -> dict[str, Any]:
    try:
        raw = json.loads((state_dir / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ConfigMissing(str(exc)) from exc
    if not isinstance(raw, dict):
        raise ConfigMissing("config.json is not an object")
    return {**DEFAULTS, **raw}


def state_dir_from_env() -> Path | None:
    value = os.environ.get(STATE_ENV, "")
    return Path(value) if value else None


def gpu_uuid(host: str, index: int) -> str:
    return f"GPU-sim-{host}-{index}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def live_records(state_dir: Path, now: float | None = None) -> list[dict[str, Any]]:
    """Records that still hold memory; stale ones are deleted (a concurrent reader may win)."""
    now = time.time() if now is None else now
    records: list[dict[str, Any]] = []
    for path in sorted((state_dir / "procs").glob("*.json")):
        rec = _read_json(path)
        if not isinstance(rec, dict) or "pid" not in rec:
            continue
        alive = pid_alive(int(rec["pid"]))
        linger_until = rec.get("linger_until")
        if alive or (linger_until is not None and now < float(linger_until)):
            records.append({**rec, "alive": alive})
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return records


def compute_apps(state_dir: Path, config: dict[str, Any]) -> list[ComputeApp]:
    apps = [ComputeApp(int(r["pid"]), int(r["gpu"]), int(r["mib"]), bool(r["alive"]),
                       util=None if r.get("util") is None else int(r["util"]))
            for r in live_records(state_dir)]
    seen: dict[int, int] = {}
    for entry in config["foreign"]:
        gpu = int(entry["gpu"])
        nth = seen.get(gpu, 0)
        seen[gpu] = nth + 1
        apps.append(ComputeApp(FOREIGN_PID_BASE + gpu + 1000 * nth, gpu, int(entry["mib"]),
                               alive=True, foreign=True))
    return sorted(apps, key=lambda a: (a.gpu, a.pid))


def used_mib(config: dict[str, Any], apps: list[ComputeApp], gpu: int) -> int:
    return int(config["base_mib"]) + sum(a.mib for a in apps if a.gpu == gpu)


def room_mib(config: dict[str, Any], apps: list[ComputeApp], gpu: int, pid: int) -> int:
    """What process `pid` may hold on `gpu` in all: the total less the base and everyone
    else's memory (live, lingering or foreign), whatever `pid` holds there now."""
    others = [a for a in apps if a.pid != pid or a.foreign]
    return int(config["memory_mib"]) - used_mib(config, others, gpu)


def process_utilization(app: ComputeApp) -> int:
    """One process's own utilisation: busy (90-99 %, stable per pid) unless set (0: hung)."""
    if not app.alive:
        return 0
    return 90 + app.pid % 10 if app.util is None else app.util


def utilization(apps: list[ComputeApp], gpu: int) -> int:
    """Busy (90-99 %, stable per pid) while a running process is on the GPU; lingering memory
    alone computes nothing."""
    running = [a for a in apps if a.gpu == gpu and a.alive]
    busy = [a.pid for a in running if a.util is None]
    if busy:
        return 90 + min(busy) % 10
    return max((a.util or 0 for a in running), default=0)


def power_w(config: dict[str, Any], util_pct: float) -> float:
    """The simulated board's power draw at a utilisation: linear from idle to busy. The one
    power model (nvidia-smi's power.draw, the stand-in energy counter of sim/state.py)."""
    idle, busy = float(config["idle_w"]), float(config["busy_w"])
    return idle + (busy - idle) * util_pct / 100.0


def record_path(state_dir: Path, pid: int, gpu: int) -> Path:
    """Where what `pid` holds on `gpu` is recorded."""
    return state_dir / "procs" / f"{pid}-{gpu}.json"


def record_paths(state_dir: Path, pid: int) -> list[Path]:
    """Every record of one process: one per GPU it holds memory on."""
    procs = state_dir / "procs"
    legacy = procs / f"{pid}.json"
    return sorted(procs.glob(f"{pid}-*.json")) + ([legacy] if legacy.exists() else [])


def set_process_util(state_dir: Path, pid: int, util: int | None) -> None:
    """A process's own utilisation on all its GPUs (0 for a hung one); None: busy as usual."""
    for path in record_paths(state_dir, pid):
        rec = _read_json(path)
        if isinstance(rec, dict):
            (state_dir / "util_set").touch()  # the fast nvidia-smi leaves such records to Python
            write_json_atomic(path, {**rec, "util": util})


def health(config: dict[str, Any], gpu: int) -> tuple[int, bool]:
    """A GPU's uncorrected ECC error count and whether it has retired pages pending."""
    ecc = config.get("ecc") or {}
    pending = config.get("pending_pages") or []
    return int(ecc.get(str(gpu), 0)), gpu in pending


def listed_gpus(config: dict[str, Any]) -> list[int]:
    """The GPUs nvidia-smi lists: a GPU that fell off the bus is not among them."""
    vanished = set(config.get("vanished") or [])
    return [i for i in range(int(config["gpus"])) if i not in vanished]


@contextlib.contextmanager
def locked(state_dir: Path) -> Iterator[None]:
    """Serialises check-then-register among fake jobs, as the driver serialises allocations."""
    fd = os.open(state_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def process_start_time() -> float | None:
    """When this process was exec'd (epoch seconds, to the kernel's clock tick), from /proc:
    a job's start is its process's start, not the end of its interpreter's imports."""
    try:
        with open("/proc/self/stat") as handle:
            ticks = int(handle.read().rsplit(") ", 1)[1].split()[19])
        with open("/proc/uptime") as handle:
            uptime = float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    # /proc/stat's btime is whole seconds; now - uptime places the boot to 10 ms
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


def append_event(state_dir: Path, event: dict[str, Any]) -> None:
    line = (json.dumps(event) + "\n").encode()
    fd = os.open(state_dir / "runs.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
