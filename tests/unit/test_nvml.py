"""The NVML reader against a stand-in `pynvml` module (the NVIDIA driver is the one part that
cannot run here; the stand-in answers as nvidia-ml-py does: bytes or str, sizes in bytes,
NVMLError for what a card does not support)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from eq_tui.hosts.base import GpuProcess, GpuReading, ProbeRequest
from eq_tui.hosts.local import make_local_host
from eq_tui.hosts.nvml import SAMPLE_WINDOW_S, NvmlReader
from eq_tui.manifest.model import HostSpec
from tests.support.engine_run import job, make_manifest, run_to_end

MIB = 1024 * 1024


class NVMLError(Exception):
    def __init__(self, text: str, value: int = 999) -> None:
        super().__init__(text)
        self.value = value  # nvidia-ml-py's error code (13: function not found)


@dataclass
class Card:
    uuid: str | bytes
    name: str | bytes
    used_mib: int | None  # None: memory info raises NVMLError (e.g. [N/A] on some cards)
    total_mib: int
    util: int | None
    procs: list[tuple[int, int | None]] | None = field(default_factory=list)  # None: raises
    # per-process utilisation samples (pid -> smUtil; an idle process has none); None: raises
    samples: dict[int, int] | None = None
    power_mw: int | None = None  # None: raises NVMLError (a card without a power reading)
    energy_mj: int | None = None  # the total-energy counter (Volta and later); None: raises
    # the driver's own reservation: NVML's first memory call counts it as used, its second
    # (memory v2) gives it apart, as nvidia-smi does (615 MiB on an idle H200)
    reserved_mib: int = 0


MEMORY_V2 = 0x02000028  # nvidia-ml-py's nvmlMemory_v2


def stand_in(cards: list[Card], *, init_fails: bool = False,
             memory_v2: bool = True) -> types.ModuleType:
    """`memory_v2`: the driver has NVML's second memory call (510 and later); without it the
    call raises "Function Not Found" as nvidia-ml-py does."""
    nvml: Any = types.ModuleType("pynvml")
    nvml.NVMLError = NVMLError
    nvml.nvmlMemory_v2 = MEMORY_V2
    nvml.init_calls = 0
    nvml.memory_calls = []  # the version each memory call asked for (None: the first call)

    def nvmlInit() -> None:
        nvml.init_calls += 1
        if init_fails:
            raise NVMLError("Driver Not Loaded")

    def memory(handle: int, version: int | None = None) -> Any:
        card = cards[handle]
        nvml.memory_calls.append(version)
        if version is not None and not memory_v2:
            raise NVMLError("Function Not Found", 13)
        if card.used_mib is None:
            raise NVMLError("Not Supported", 3)
        free = (card.total_mib - card.used_mib - card.reserved_mib) * MIB
        if version == MEMORY_V2:
            return types.SimpleNamespace(version=version, used=card.used_mib * MIB,
                                         reserved=card.reserved_mib * MIB,
                                         total=card.total_mib * MIB, free=free)
        assert version is None
        return types.SimpleNamespace(used=(card.used_mib + card.reserved_mib) * MIB,
                                     total=card.total_mib * MIB, free=free)

    def utilization(handle: int) -> Any:
        if cards[handle].util is None:
            raise NVMLError("Not Supported")
        return types.SimpleNamespace(gpu=cards[handle].util, memory=0)

    def processes(handle: int) -> list[Any]:
        procs = cards[handle].procs
        if procs is None:
            raise NVMLError("Not Supported")
        return [types.SimpleNamespace(pid=pid, usedGpuMemory=None if mib is None else mib * MIB)
                for pid, mib in procs]

    def process_utilization(handle: int, since_us: int) -> list[Any]:
        samples = cards[handle].samples
        if samples is None:
            raise NVMLError("Not Supported")
        assert since_us > 0
        return [types.SimpleNamespace(pid=pid, smUtil=sm, memUtil=0, timeStamp=since_us + 1)
                for pid, sm in samples.items()]

    def power(handle: int) -> int:
        if cards[handle].power_mw is None:
            raise NVMLError("Not Supported")
        return cards[handle].power_mw  # type: ignore[return-value]

    def energy(handle: int) -> int:
        if cards[handle].energy_mj is None:
            raise NVMLError("Not Supported")
        return cards[handle].energy_mj  # type: ignore[return-value]

    nvml.nvmlDeviceGetPowerUsage = power
    nvml.nvmlDeviceGetTotalEnergyConsumption = energy
    nvml.nvmlInit = nvmlInit
    nvml.nvmlDeviceGetProcessUtilization = process_utilization
    nvml.nvmlDeviceGetCount = lambda: len(cards)
    nvml.nvmlDeviceGetHandleByIndex = lambda index: index
    nvml.nvmlDeviceGetUUID = lambda handle: cards[handle].uuid
    nvml.nvmlDeviceGetName = lambda handle: cards[handle].name
    nvml.nvmlDeviceGetMemoryInfo = memory
    nvml.nvmlDeviceGetUtilizationRates = utilization
    nvml.nvmlDeviceGetComputeRunningProcesses = processes
    return nvml  # type: ignore[no-any-return]


# pids above any pid_max (2**22): no live process of the machine running the test has them,
# so the reader finds no process group for them (4343 once did)
CARDS = [
    Card(b"GPU-aaaa", b"NVIDIA A100-SXM4-80GB", 1200, 81920, 97,
         [(4194342, 1100), (4194343, None)]),
    Card("GPU-bbbb", "NVIDIA A100-SXM4-80GB", 0, 81920, 0),
    Card("GPU-cccc", "NVIDIA T4", None, 15360, None, None),
]


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = stand_in(CARDS)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


async def test_the_reader_turns_nvml_answers_into_readings(fake_nvml: Any) -> None:
    reader = NvmlReader.open()
    assert reader is not None and fake_nvml.init_calls == 1
    gpus, processes, warnings = await reader.read()
    assert gpus == [
        GpuReading(0, "GPU-aaaa", "NVIDIA A100-SXM4-80GB", 1200, 81920, 97),
        GpuReading(1, "GPU-bbbb", "NVIDIA A100-SXM4-80GB", 0, 81920, 0),
        GpuReading(2, "GPU-cccc", "NVIDIA T4", None, None, None),
    ]
    assert processes == [GpuProcess(4194342, "GPU-aaaa", 1100),
                         GpuProcess(4194343, "GPU-aaaa", None)]
    # memory it cannot read: no reading (so no launch there) and a warning naming the GPU
    assert warnings == ["GPU 2: memory not readable (Not Supported); no launches on it"]


async def test_a_read_that_fails_midway_is_a_warning_not_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    module: Any = stand_in(CARDS)

    def lost(_index: int) -> int:
        raise NVMLError("GPU is lost")

    module.nvmlDeviceGetHandleByIndex = lost
    monkeypatch.setitem(sys.modules, "pynvml", module)
    reader = NvmlReader.open()
    assert reader is not None
    assert await reader.read() == ([], [], ["NVML read failed: GPU is lost"])


async def test_on_a_shared_gpu_each_process_gets_its_own_utilisation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As on the H100: the busy process is sampled at 99 %, the idle one is left out (0)."""
    cards = [Card("GPU-aaaa", "NVIDIA H100 80GB HBM3", 4149, 81559, 99,
                  [(439, 1476), (440, 1476)], samples={439: 99}),
             Card("GPU-bbbb", "NVIDIA H100 80GB HBM3", 1476, 81559, 99, [(441, 1476)],
                  samples={441: 99})]
    monkeypatch.setitem(sys.modules, "pynvml", stand_in(cards))
    reader = NvmlReader.open()
    assert reader is not None
    _gpus, processes, _warnings = await reader.read()
    # a GPU one process has alone: its utilisation is the card's, no per-process read
    assert [(p.pid, p.util_pct) for p in processes] == [(439, 99), (440, 0), (441, None)]


async def test_the_reader_gives_each_card_its_power_and_energy_counter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Power in mW and the counter in mJ become W and J; a card without them reads None (an
    older card has power but no counter)."""
    cards = [Card("GPU-aaaa", "NVIDIA H100 80GB HBM3", 0, 81559, 0, power_mw=312_500,
                  energy_mj=9_876_543_210),
             Card("GPU-bbbb", "Tesla P100", 0, 16280, 0, power_mw=31_000),
             Card("GPU-cccc", "NVIDIA T4", 0, 15360, 0)]
    monkeypatch.setitem(sys.modules, "pynvml", stand_in(cards))
    reader = NvmlReader.open()
    assert reader is not None
    gpus, _processes, _warnings = await reader.read()
    assert [(g.power_w, g.energy_j) for g in gpus] == [(312.5, 9_876_543.21), (31.0, None),
                                                      (None, None)]


H200_IDLE = Card("GPU-h200", "NVIDIA H200", 0, 143771, 0, reserved_mib=615)


async def test_an_idle_h200_reads_as_nvidia_smi_prints_it_not_as_615_mib_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Read on an H200 (driver 580): NVML's first memory call said 615 MiB used with no process
    on the card, over the 500 MiB free threshold; nvidia-smi and the second call said 0 used,
    616 reserved. A card's own reservation is nobody's job: the reading is the second call's."""
    module = stand_in([H200_IDLE, Card("GPU-busy", "NVIDIA H200", 12000, 143771, 99,
                                       [(77, 11400)], reserved_mib=615)])
    monkeypatch.setitem(sys.modules, "pynvml", module)
    reader = NvmlReader.open()
    assert reader is not None
    gpus, _processes, warnings = await reader.read()
    assert [(g.memory_used_mib, g.memory_total_mib) for g in gpus] == [(0, 143771),
                                                                     (12000, 143771)]
    assert warnings == [] and module.memory_calls == [MEMORY_V2, MEMORY_V2]


async def test_a_driver_without_the_second_memory_call_is_read_with_the_first_and_asked_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    module = stand_in([Card("GPU-aaaa", "Tesla V100", 300, 16384, 0),
                       Card("GPU-bbbb", "Tesla V100", None, 16384, 0)], memory_v2=False)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    reader = NvmlReader.open()
    assert reader is not None
    for _ in range(2):
        gpus, _processes, warnings = await reader.read()
        assert [g.memory_used_mib for g in gpus] == [300, None]
        assert warnings == ["GPU 1: memory not readable (Not Supported); no launches on it"]
    # "Function Not Found" is the driver's answer for every card: never asked again
    assert module.memory_calls == [MEMORY_V2, None, None, None, None]


async def test_a_card_the_second_call_cannot_read_is_asked_the_first_without_giving_it_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """"Not Supported" is one card's answer (a T4 printing [N/A]), not the driver's: the next
    card is still read with the second call."""
    module = stand_in([Card("GPU-cccc", "NVIDIA T4", None, 15360, None), H200_IDLE])
    monkeypatch.setitem(sys.modules, "pynvml", module)
    reader = NvmlReader.open()
    assert reader is not None
    gpus, _processes, warnings = await reader.read()
    assert [g.memory_used_mib for g in gpus] == [None, 0]
    assert warnings == ["GPU 0: memory not readable (Not Supported); no launches on it"]
    assert module.memory_calls == [MEMORY_V2, None, MEMORY_V2]


def test_no_driver_or_no_library_means_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", stand_in(CARDS, init_fails=True))
    assert NvmlReader.open() is None
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    assert NvmlReader.open() is None


def test_a_local_host_reads_gpus_through_nvml_when_it_can(fake_nvml: Any,
                                                          tmp_path: Path) -> None:
    host = make_local_host("here", str(tmp_path))
    assert host.gpu_reader is not None and not host.query_gpus


@pytest.mark.integration
async def test_a_local_probe_carries_the_nvml_readings(fake_nvml: Any, tmp_path: Path) -> None:
    host = make_local_host("here", str(tmp_path))
    snapshot = await host.probe(ProbeRequest())
    assert snapshot.ok, snapshot.error
    assert [g.uuid for g in snapshot.gpus] == ["GPU-aaaa", "GPU-bbbb", "GPU-cccc"]
    assert snapshot.gpus[0].memory_used_mib == 1200 and snapshot.gpus[2].memory_used_mib is None
    assert [p.pid for p in snapshot.processes] == [4194342, 4194343]
    assert "GPU 2: memory not readable (Not Supported); no launches on it" in snapshot.warnings


@pytest.mark.integration
async def test_a_whole_card_job_starts_on_an_idle_h200_read_through_nvml(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The engine on a local host whose card NVML reads as the H200 did: the job (no mem_mib,
    so it needs the card under the free threshold) runs; on the first memory call's 615 MiB
    it waited for good ("no free GPU (1 of 1 busy)")."""
    monkeypatch.setitem(sys.modules, "pynvml", stand_in([H200_IDLE]))
    marker = tmp_path / "ran"
    manifest = make_manifest(
        tmp_path, [job("whole", f"echo $CUDA_VISIBLE_DEVICES > {shlex.quote(str(marker))}")],
        hosts=(HostSpec(name="here", gpus=(0,), claims_dir=str(tmp_path / "claims")),))
    code, _run = await run_to_end(manifest, tmp_path / "run", timeout=30)
    assert code == 0
    assert marker.read_text().strip() == "0"  # the host's own record: it ran, on GPU 0


async def test_each_process_carries_its_own_group_and_session_told_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML gives pids only; the reader adds each local process's group and session (which
    attempt it is: claims, memory, cost). A real process in a group of its own, in this
    test's session: its group and its session differ, each read as what it is; a process that
    is gone has neither."""
    child = subprocess.Popen(["sleep", "60"], process_group=0)
    try:
        gone = subprocess.Popen(["true"])
        gone.wait()
        cards = [Card("GPU-aaaa", "NVIDIA H100 80GB HBM3", 4000, 81559, 50,
                      [(child.pid, 3000), (gone.pid, 1000)], samples={child.pid: 40}),
                 Card("GPU-bbbb", "NVIDIA H100 80GB HBM3", 0, 81559, 0, [(child.pid, 0)])]
        monkeypatch.setitem(sys.modules, "pynvml", stand_in(cards))
        reader = NvmlReader.open()
        assert reader is not None
        _gpus, processes, _warnings = await reader.read()
    finally:
        child.kill()
        child.wait()
    assert os.getsid(0) != child.pid  # the fixture: the child's group is not its session
    assert processes == [
        GpuProcess(child.pid, "GPU-aaaa", 3000, pgid=child.pid, sid=os.getsid(0), util_pct=40),
        GpuProcess(gone.pid, "GPU-aaaa", 1000, util_pct=0),
        # no memory in use: no reading (NVML's 0 is "not available" on some drivers)
        GpuProcess(child.pid, "GPU-bbbb", None, pgid=child.pid, sid=os.getsid(0))]


async def test_a_processs_utilisation_is_its_busiest_sample_in_the_window(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML returns one sample per process per sampling period: the busiest in the last
    seconds is the process's (a process sampled idle then busy is busy)."""
    module: Any = stand_in([Card("GPU-aaaa", "NVIDIA A100", 3000, 81920, 80,
                                 [(11, 1500), (12, 1500)], samples={})])
    asked: list[int] = []

    def samples(_handle: int, since_us: int) -> list[Any]:
        asked.append(since_us)
        return [types.SimpleNamespace(pid=pid, smUtil=sm, memUtil=0, timeStamp=since_us + 1)
                for pid, sm in ((11, 20), (12, 5), (11, 70), (11, 30))]

    module.nvmlDeviceGetProcessUtilization = samples
    monkeypatch.setitem(sys.modules, "pynvml", module)
    reader = NvmlReader.open()
    assert reader is not None
    before = time.time()
    _gpus, processes, _warnings = await reader.read()
    assert [(p.pid, p.util_pct) for p in processes] == [(11, 70), (12, 5)]
    # the window: about one probe interval back from now, in microseconds
    [since] = asked
    assert (before - SAMPLE_WINDOW_S - 1) * 1e6 < since <= (time.time() - SAMPLE_WINDOW_S) * 1e6


async def test_a_binding_without_the_power_calls_reads_no_power(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An old nvidia-ml-py has neither power call (AttributeError, not NVMLError): the card
    reads without power, the rest as always."""
    module: Any = stand_in([Card("GPU-aaaa", "Tesla K80", 100, 11441, 3, power_mw=90_000,
                                 energy_mj=5_000)])
    del module.nvmlDeviceGetPowerUsage
    del module.nvmlDeviceGetTotalEnergyConsumption
    monkeypatch.setitem(sys.modules, "pynvml", module)
    reader = NvmlReader.open()
    assert reader is not None
    gpus, _processes, warnings = await reader.read()
    assert gpus == [GpuReading(0, "GPU-aaaa", "Tesla K80", 100, 11441, 3, None, None)]
    assert warnings == []
