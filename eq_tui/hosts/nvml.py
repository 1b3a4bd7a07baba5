"""GPU readings through NVML (`nvidia-ml-py`, imported as `pynvml`) when a driver is present."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from eq_tui.hosts.base import GpuProcess, GpuReading

MIB = 1024 * 1024
SAMPLE_WINDOW_S = 3.0  # per-process utilisation samples looked at: about one probe interval
_NO_SUCH_CALL = (13, 25)  # NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_ARGUMENT_VERSION_MISMATCH


class NvmlReader:
    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        # the version tag of NVML's second memory call; None once the driver lacks it (or a
        # binding older than nvidia-ml-py 11.510 never had it)
        self._memory_v2: int | None = getattr(nvml, "nvmlMemory_v2", None)

    @classmethod
    def open(cls) -> NvmlReader | None:
        """The reader, or None when there is no NVIDIA driver (then nvidia-smi is used)."""
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception:  # no library, no driver, no device: all mean "use nvidia-smi"
            return None
        return cls(pynvml)

    def _read_sync(self) -> tuple[list[GpuReading], list[GpuProcess], list[str]]:
        nvml = self._nvml
        readings: list[GpuReading] = []
        processes: list[GpuProcess] = []
        warnings: list[str] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            used = total = util = None
            try:
                used, total = self._memory_mib(handle)
            except nvml.NVMLError as exc:
                warnings.append(f"GPU {index}: memory not readable ({exc}); no launches on it")
            try:
                util = int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except nvml.NVMLError:
                util = None
            readings.append(GpuReading(index, uuid, _text(nvml.nvmlDeviceGetName(handle)), used,
                                       total, util, *_power(nvml, handle)))
            on_gpu: list[GpuProcess] = []
            try:
                for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    mib = proc.usedGpuMemory // MIB if proc.usedGpuMemory else None
                    pid = int(proc.pid)
                    on_gpu.append(GpuProcess(pid, uuid, mib, pgid=_group(os.getpgid, pid),
                                             sid=_group(os.getsid, pid)))
            except nvml.NVMLError:
                pass
            processes += _with_own_utilisation(nvml, handle, on_gpu)
        return readings, processes, warnings

    def _memory_mib(self, handle: Any) -> tuple[int, int]:
        """Used and total MiB as nvidia-smi prints memory.used and memory.total. NVML's first
        memory call counts the driver's own reservation as used: 615 MiB on an idle H200, over
        the free threshold, so no whole-card job ever started there. Its second call (driver
        510 and later) keeps the reservation apart; the first is asked only without it."""
        nvml = self._nvml
        if self._memory_v2 is not None:
            try:
                memory = nvml.nvmlDeviceGetMemoryInfo(handle, version=self._memory_v2)
                return memory.used // MIB, memory.total // MIB
            except nvml.NVMLError as exc:
                if getattr(exc, "value", None) in _NO_SUCH_CALL:
                    self._memory_v2 = None  # the driver's answer for every card: ask no more
                # otherwise the first call answers or says why not (a card without readings)
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        return memory.used // MIB, memory.total // MIB

    async def read(self) -> tuple[list[GpuReading], list[GpuProcess], list[str]]:
        try:
            return await asyncio.to_thread(self._read_sync)
        except Exception as exc:
            return [], [], [f"NVML read failed: {exc}"]


def _power(nvml: Any, handle: Any) -> tuple[float | None, float | None]:
    """The board's power now (W) and its total-energy counter (J; Volta and later): None each
    where the card has no such reading."""
    try:
        watts: float | None = nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
    except (nvml.NVMLError, AttributeError):  # AttributeError: a binding without the call
        watts = None
    try:
        joules: float | None = nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0
    except (nvml.NVMLError, AttributeError):
        joules = None
    return watts, joules


def _with_own_utilisation(nvml: Any, handle: Any,
                          processes: list[GpuProcess]) -> list[GpuProcess]:
    """On a GPU several processes share, each one's own SM utilisation over the last seconds
    (NVML leaves a process that computed nothing out of its samples: 0); as they were where the
    driver cannot tell."""
    if len(processes) < 2:
        return processes
    since_us = int((time.time() - SAMPLE_WINDOW_S) * 1_000_000)
    try:
        samples = nvml.nvmlDeviceGetProcessUtilization(handle, since_us)
    except nvml.NVMLError:
        return processes
    own: dict[int, int] = {}
    for sample in samples:
        own[int(sample.pid)] = max(own.get(int(sample.pid), 0), int(sample.smUtil))
    return [replace(p, util_pct=own.get(p.pid, 0)) for p in processes]


def _group(read: Callable[[int], int], pid: int) -> int | None:
    """A local process's group or session (None when it is gone or not ours to see)."""
    try:
        return read(pid)
    except OSError:
        return None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
