"""What a job cost, from its attempts' records: GPU-seconds and energy (pure; the engine meters
them, engine/tick/cost.py). Works on attempt records as dicts (the snapshot's, the state file's)
or as `Attempt`s alike."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eq_tui.results import numbers

J_PER_WH = 3600.0


def _get(attempt: Any, key: str, default: Any = None) -> Any:
    if isinstance(attempt, dict):
        return attempt.get(key, default)
    return getattr(attempt, key, default)


def attempt_gpu_s(attempt: Any, now: float | None = None) -> float:
    """Its time x its GPUs, from the host's start to its end (a running one: to `now`, else to
    where it was metered), less the share others had of its shared GPUs."""
    start = _get(attempt, "start")
    if start is None or not _get(attempt, "launched", True):
        return 0.0
    stop = _get(attempt, "end")
    if stop is None:
        stop = now if now is not None else _get(attempt, "metered_until")
    if stop is None:
        return 0.0
    gpus = len(_get(attempt, "gpus") or [])
    return max(0.0, (float(stop) - float(start)) * gpus - float(_get(attempt, "shared_off_s", 0)))


def attempt_energy_j(attempt: Any) -> float | None:
    """The joules its GPUs drew for it; None when unknown (no power reading for some of its
    time, a Slurm GPU, a CPU-only job): never a partial figure."""
    if _get(attempt, "start") is None or not _get(attempt, "launched", True):
        return 0.0
    if _get(attempt, "energy_gap") or _get(attempt, "energy_j") is None:
        return None
    return float(_get(attempt, "energy_j"))


def job_cost(history: Iterable[Any], now: float | None = None) -> tuple[float, float | None]:
    """A job's GPU-seconds and joules over all its attempts (a failed or pruned attempt spent
    them too); its energy is None when any attempt's is unknown."""
    gpu_s, energy = 0.0, 0.0
    known = True
    for attempt in history:
        gpu_s += attempt_gpu_s(attempt, now)
        joules = attempt_energy_j(attempt)
        if joules is None:
            known = False
        else:
            energy += joules
    return gpu_s, energy if known else None


def cost_record(history: Iterable[Any]) -> dict[str, float | None]:
    """The `cost` of a results.jsonl line: GPU-seconds and joules (null: unknown)."""
    gpu_s, energy = job_cost(history)
    return {"gpu_s": round(gpu_s, 2), "energy_j": None if energy is None else round(energy, 1)}


def energy_text(joules: float | None) -> str:
    """Energy in words: Wh or kWh (numbers.energy); `-` when unknown."""
    return numbers.energy(None if joules is None else joules / J_PER_WH)


def gpu_hours_text(gpu_s: float) -> str:
    """GPU time in the unit that fits: `42 GPU-s`, `3.3 GPU-min`, `1.4 GPU-h`."""
    return numbers.gpu_time(gpu_s)
