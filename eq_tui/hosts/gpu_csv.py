"""Parse nvidia-smi CSV (`--format=csv,noheader,nounits`): odd values become None + a warning."""

from __future__ import annotations

import math

from eq_tui.hosts.base import GpuProcess, GpuReading

GPU_FIELDS = 7  # index, uuid, name, memory.used, memory.total, utilization.gpu, power.draw
OLD_GPU_FIELDS = 6  # before power.draw was asked (a probe script of an older eq-tui)
APP_FIELDS = 3


def _number(value: str) -> int | None:
    value = value.strip()
    if value.endswith(("MiB", "%")):
        value = value.rstrip("MiB%").strip()
    try:
        return int(float(value))
    except (ValueError, OverflowError):
        return None  # [N/A], [Not Supported], [Unknown Error], empty, nan, inf


def _watts(value: str) -> float | None:
    value = value.strip().removesuffix("W").strip()
    try:
        watts = float(value)
    except ValueError:
        return None  # [N/A]: a card without a power reading
    return watts if math.isfinite(watts) and watts >= 0 else None


def parse_gpus(text: str) -> tuple[list[GpuReading], list[str]]:
    readings: list[GpuReading] = []
    warnings: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) not in (GPU_FIELDS, OLD_GPU_FIELDS):
            warnings.append(f"nvidia-smi: unexpected line {line[:120]!r}")
            continue
        index = _number(fields[0])
        if index is None:
            warnings.append(f"nvidia-smi: no GPU index in {line[:120]!r}")
            continue
        reading = GpuReading(index=index, uuid=fields[1], name=fields[2],
                             memory_used_mib=_number(fields[3]),
                             memory_total_mib=_number(fields[4]),
                             utilization_pct=_number(fields[5]),
                             power_w=_watts(fields[6]) if len(fields) == GPU_FIELDS else None)
        if reading.memory_used_mib is None:
            warnings.append(f"GPU {index}: memory.used is {fields[3]!r}; no launches on it")
        readings.append(reading)
    return readings, warnings


def parse_apps(text: str) -> tuple[list[GpuProcess], list[str]]:
    processes: list[GpuProcess] = []
    warnings: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.lower().startswith("no running"):
            continue
        fields = [f.strip() for f in line.split(",")]
        pid = _number(fields[0]) if len(fields) == APP_FIELDS else None
        if pid is None:
            warnings.append(f"nvidia-smi compute apps: unexpected line {line[:120]!r}")
            continue
        processes.append(GpuProcess(pid=pid, gpu_uuid=fields[1], used_mib=_number(fields[2])))
    return processes, warnings


def parse_pmon(text: str) -> dict[tuple[int, int], int]:
    """`nvidia-smi pmon -c 1 -s u`: (GPU index, pid) -> the process's own SM utilisation there
    (`-`, a process that computed nothing in the sample, is 0)."""
    utils: dict[tuple[int, int], int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or line.lstrip().startswith("#"):
            continue
        gpu, pid = _number(fields[0]), _number(fields[1])
        if gpu is not None and pid is not None:
            utils[(gpu, pid)] = _number(fields[3]) or 0
    return utils
