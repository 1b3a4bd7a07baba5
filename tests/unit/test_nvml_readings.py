"""The NVML reader's arithmetic and its oldest bindings, against the stand-in `pynvml` of
tests/unit/test_nvml.py: a card's sizes come in bytes that are rarely whole MiB, a binding
older than nvidia-ml-py 11.510 has no `nvmlMemory_v2`, an NVMLError need not carry a code, and
a process sampled idle is idle."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from eq_tui.hosts.nvml import NvmlReader
from tests.unit.test_nvml import MEMORY_V2, Card, NVMLError, stand_in

# what an H200 printed with a job on it is not whole MiB in bytes: 12000.7 MiB used
BUSY = Card("GPU-busy", "NVIDIA H200", 12000.7, 143771.4, 99,  # type: ignore[arg-type]
            [(77, 11400.9)])  # type: ignore[list-item]


def in_whole_bytes(module: Any) -> Any:
    """The stand-in's sizes as nvidia-ml-py gives them: whole bytes (an int)."""
    memory, processes = module.nvmlDeviceGetMemoryInfo, module.nvmlDeviceGetComputeRunningProcesses

    def memory_info(handle: int, version: int | None = None) -> Any:
        info = memory(handle, version) if version is not None else memory(handle)
        info.used, info.total = int(info.used), int(info.total)
        return info

    def running(handle: int) -> list[Any]:
        found = processes(handle)
        for proc in found:
            proc.usedGpuMemory = int(proc.usedGpuMemory)
        return found

    module.nvmlDeviceGetMemoryInfo = memory_info
    module.nvmlDeviceGetComputeRunningProcesses = running
    return module


async def read(module: Any) -> tuple[Any, Any, Any]:
    reader = NvmlReader.open()
    assert reader is not None
    return await reader.read()


@pytest.mark.parametrize("memory_v2", [True, False])
async def test_sizes_in_bytes_read_as_whole_mib_rounded_down(
        monkeypatch: pytest.MonkeyPatch, memory_v2: bool) -> None:
    """Through the second memory call and, on a driver without it, the first: whole MiB (an
    int, as nvidia-smi prints), never 12000.7, for the card and for each process."""
    module = in_whole_bytes(stand_in([BUSY], memory_v2=memory_v2))
    monkeypatch.setitem(sys.modules, "pynvml", module)
    gpus, processes, warnings = await read(module)
    used, total = gpus[0].memory_used_mib, gpus[0].memory_total_mib
    assert (used, total) == (12000, 143771) and warnings == []
    assert type(used) is int and type(total) is int
    assert [(p.pid, p.used_mib) for p in processes] == [(77, 11400)]
    assert type(processes[0].used_mib) is int


async def test_a_binding_without_the_second_memory_call_asks_the_first_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    module: Any = stand_in([Card("GPU-aaaa", "Tesla V100", 300, 16384, 0)])
    del module.nvmlMemory_v2
    monkeypatch.setitem(sys.modules, "pynvml", module)
    gpus, _processes, warnings = await read(module)
    assert [g.memory_used_mib for g in gpus] == [300] and warnings == []
    assert module.memory_calls == [None]


class BareNVMLError(NVMLError):
    """An NVMLError without nvidia-ml-py's `value` (a binding's own, or one raised by hand)."""

    def __init__(self, text: str) -> None:
        Exception.__init__(self, text)


async def test_an_error_without_a_code_from_the_second_call_falls_back_to_the_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    module: Any = stand_in([Card("GPU-aaaa", "Tesla V100", 300, 16384, 0),
                            Card("GPU-bbbb", "Tesla V100", 500, 16384, 0)])
    first = module.nvmlDeviceGetMemoryInfo

    def memory(handle: int, version: int | None = None) -> Any:
        if version is not None and handle == 0:
            module.memory_calls.append(version)
            raise BareNVMLError("Unknown Error")
        return first(handle, version) if version is not None else first(handle)

    module.nvmlDeviceGetMemoryInfo = memory
    monkeypatch.setitem(sys.modules, "pynvml", module)
    gpus, _processes, warnings = await read(module)
    assert [g.memory_used_mib for g in gpus] == [300, 500] and warnings == []
    # not the driver's "Function Not Found": the next card is still asked the second call
    assert module.memory_calls == [MEMORY_V2, None, MEMORY_V2]


async def test_a_process_sampled_idle_reads_zero_not_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cards = [Card("GPU-aaaa", "NVIDIA H100 80GB HBM3", 4149, 81559, 40,
                  [(439, 1476), (440, 1476)], samples={439: 0, 440: 40})]
    monkeypatch.setitem(sys.modules, "pynvml", stand_in(cards))
    _gpus, processes, _warnings = await read(None)
    assert [(p.pid, p.util_pct) for p in processes] == [(439, 0), (440, 40)]
