"""The engine's memory book (engine/tick/memory.py MemoryBook): what each running attempt's
processes use, its peak (kept in its record), when its usage has levelled off, what a family of
`mem_mib: auto` jobs learns, and when placement by memory is on at all.

A real ledger, bus and run directory; the probes are HostSnapshots as a host returns them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.state.bus import Bus
from eq_tui.engine.state.host_record import HostLink, HostRecord
from eq_tui.engine.state.ledger import Ledger
from eq_tui.engine.state.store import RunDir
from eq_tui.engine.tick.memory import (
    GROWTH_MIB,
    LEVEL_AFTER_S,
    LEVEL_UNKNOWN_S,
    MemoryBook,
    Usage,
    levelled,
    uses_memory_placement,
)
from eq_tui.hosts.base import AttemptProbe, GpuProcess, GpuReading, HostSnapshot
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.manifest.model import JobSpec, Manifest

GIB = 1024


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def spec(id: str, mem: Any = "auto", **kwargs: Any) -> JobSpec:
    return JobSpec(id=id, phase="main", cmd="train", mem_mib=mem, family="fam", **kwargs)


def running(job_id: str, gpus: list[int], *, n: int = 1, peak: int | None = None,
            estimate: int | None = None) -> JobState:
    job = JobState(id=job_id, phase="main", cmd="train", status=JobStatus.RUNNING, attempts=n)
    job.history.append(Attempt(n=n, host="h", gpus=gpus, session=f"s{job_id}",
                               attempt_dir="d", log="l", peak_mib=peak, estimate_mib=estimate,
                               shared=estimate is not None))
    return job


class Bed:
    def __init__(self, tmp_path: Path, specs: list[JobSpec], jobs: list[JobState]) -> None:
        self.clock = Clock()
        manifest = Manifest(project="p", source="m.yaml", jobs=tuple(specs))
        run_dir = RunDir(tmp_path)
        bus = Bus("p", run_dir, self.clock)
        self.ledger = Ledger(manifest, bus, self.clock, on_release=lambda *_: None,
                             output_pattern=lambda _spec: None)
        for job in jobs:
            self.ledger.jobs[job.id] = job
        self.hosts = {name: HostRecord(name, ShellHost(name, LocalRunner()), None,
                                       HostLink("up", 0.0)) for name in ("h", "g")}
        self.ctx = RunContext(manifest=manifest, run_dir=run_dir, hosts=self.hosts,
                              clock=self.clock, bus=bus, ledger=self.ledger, token="t",
                              created=0.0, started_at=0.0)
        self.book = MemoryBook(self.ctx)

    def probe(self, uses: dict[str, dict[int, int]], *, host: str = "h", ok: bool = True,
              other: int = 0, unlisted: int = 0) -> None:
        """One probe of `host`: job -> GPU -> MiB its process group uses; `other` MiB on GPU 0
        held by someone else's process, `unlisted` MiB no process accounts for."""
        procs: list[GpuProcess] = []
        attempts: dict[str, AttemptProbe] = {}
        for pid, (job_id, per_gpu) in enumerate(uses.items(), start=100):
            attempts[job_id] = AttemptProbe(key=job_id, session_alive=True, pid=pid,
                                            pid_alive=True, started=1.0, exit_code=None,
                                            exited_at=None, log_size=0, output_ok=None,
                                            pgid=pid)
            procs += [GpuProcess(pid, f"GPU-{gpu}", mib, pgid=pid, sid=pid)
                      for gpu, mib in per_gpu.items()]
        if other:
            procs.append(GpuProcess(9, "GPU-0", other, pgid=9, sid=9))
        used = {gpu: sum(p.used_mib or 0 for p in procs if p.gpu_uuid == f"GPU-{gpu}")
                for gpu in (0, 1)}
        gpus = tuple(GpuReading(i, f"GPU-{i}", "Sim", used[i] + (unlisted if i == 0 else 0),
                                80 * GIB, 0) for i in (0, 1))
        self.hosts[host].snapshot = HostSnapshot(host, ok, self.clock(), gpus=gpus,
                                                 processes=tuple(procs), attempts=attempts)
        self.book.observe([host])


def test_usage_and_peak_are_measured_per_attempt_and_the_peak_is_recorded(
        tmp_path: Path) -> None:
    job = running("a", [0, 1])
    bed = Bed(tmp_path, [spec("a", 20 * GIB)], [job])
    bed.probe({"a": {0: 3 * GIB, 1: 1 * GIB}}, other=500, unlisted=200)
    usage = bed.book.usage["a"]
    assert (usage.attempt, usage.now, usage.peak) == (1, {0: 3 * GIB, 1: GIB}, 3 * GIB)
    assert job.history[-1].peak_mib == 3 * GIB and "a" in bed.ledger.changed_ids
    # someone else's 500 MiB plus the 200 no process accounts for; ours is not theirs
    assert bed.book.others["h"] == {0: 700, 1: 0}
    # a smaller reading keeps the peak
    bed.probe({"a": {0: GIB}})
    assert (usage.now, usage.peak, job.history[-1].peak_mib) == ({0: GIB}, 3 * GIB, 3 * GIB)


def test_a_peak_that_grows_by_less_than_growth_mib_is_not_written(tmp_path: Path) -> None:
    job = running("a", [0])
    bed = Bed(tmp_path, [spec("a", 20 * GIB)], [job])
    bed.probe({"a": {0: 4000}})
    bed.ledger.changed_ids.clear()
    bed.probe({"a": {0: 4000 + GROWTH_MIB - 1}})
    assert bed.book.usage["a"].peak == 4000 + GROWTH_MIB - 1
    assert job.history[-1].peak_mib == 4000 and "a" not in bed.ledger.changed_ids
    bed.probe({"a": {0: 4000 + GROWTH_MIB}})
    assert job.history[-1].peak_mib == 4000 + GROWTH_MIB and "a" in bed.ledger.changed_ids


def test_a_new_attempt_starts_from_its_recorded_peak(tmp_path: Path) -> None:
    job = running("a", [0], n=2, peak=6 * GIB)
    bed = Bed(tmp_path, [spec("a", 20 * GIB)], [job])
    bed.book.usage["a"] = Usage(attempt=1, peak=9 * GIB)  # the attempt before
    bed.probe({"a": {0: GIB}})
    usage = bed.book.usage["a"]
    assert (usage.attempt, usage.peak, usage.grew_at) == (2, 6 * GIB, 1000.0)


def test_growth_moves_the_levelling_clock_and_small_growth_does_not(tmp_path: Path) -> None:
    bed = Bed(tmp_path, [spec("a", 20 * GIB)], [running("a", [0])])
    bed.probe({"a": {0: 2000}})
    usage = bed.book.usage["a"]
    assert (usage.grew_at, usage.mark) == (1000.0, 2000)
    bed.clock.now = 1005.0
    bed.probe({"a": {0: 2000 + GROWTH_MIB - 1}})
    assert (usage.grew_at, usage.mark) == (1000.0, 2000)
    bed.clock.now = 1006.0
    bed.probe({"a": {0: 2000 + GROWTH_MIB}})
    assert (usage.grew_at, usage.mark) == (1006.0, 2000 + GROWTH_MIB)


def test_hosts_not_probed_or_failed_and_attempts_without_a_group_are_skipped(
        tmp_path: Path) -> None:
    bed = Bed(tmp_path, [spec("a", 20 * GIB)], [running("a", [0])])
    bed.probe({"a": {0: GIB}}, ok=False)
    assert bed.book.usage == {} and bed.book.others == {}
    bed.book.observe(["nowhere"])
    assert bed.book.others == {}
    snap = HostSnapshot("h", True, 0.0, gpus=(GpuReading(0, "GPU-0", "Sim", 5, 80 * GIB, 0),),
                        attempts={"a": AttemptProbe("a", True, 1, True, 1.0, None, None, 0,
                                                    None)})
    bed.hosts["h"].snapshot = snap
    bed.book.observe(["h"])
    assert bed.book.usage == {} and bed.book.others == {"h": {0: 5}}


def test_an_auto_family_learns_from_a_levelled_peak_and_from_an_ended_attempt(
        tmp_path: Path) -> None:
    a, b = running("a", [0]), running("b", [1], estimate=10 * GIB)
    bed = Bed(tmp_path, [spec("a"), spec("b")], [a, b])
    bed.probe({"a": {0: 5 * GIB}, "b": {1: 9 * GIB}})
    assert bed.book.family_peak == {}  # nothing levelled yet
    bed.clock.now = 1000.0 + LEVEL_AFTER_S  # b, near its estimate, has levelled; a has not
    bed.probe({"a": {0: 5 * GIB}, "b": {1: 9 * GIB}})
    assert bed.book.family_peak == {"fam": 9 * GIB}
    # a ends: its peak, whole, is learned even though it never levelled; the largest stays
    a.status = JobStatus.COMPLETED
    bed.probe({"b": {1: 9 * GIB}})
    assert "a" not in bed.book.usage and bed.book.family_peak == {"fam": 9 * GIB}
    b.status = JobStatus.STUCK
    b.history[-1].peak_mib = 0
    bed.probe({})
    assert bed.book.usage == {} and b.history[-1].peak_mib == 9 * GIB


def test_an_ended_attempts_peak_is_learned_and_kept_in_its_record(tmp_path: Path) -> None:
    job = running("a", [0])
    bed = Bed(tmp_path, [spec("a")], [job])
    bed.probe({"a": {0: 7 * GIB}})
    job.history[-1].peak_mib = 5 * GIB  # as an older record had it
    job.status = JobStatus.COMPLETED
    bed.ledger.changed_ids.clear()
    bed.probe({})
    assert job.history[-1].peak_mib == 7 * GIB and "a" in bed.ledger.changed_ids
    assert bed.book.family_peak == {"fam": 7 * GIB}


def test_a_fixed_size_job_teaches_no_family_and_a_removed_job_is_forgotten(
        tmp_path: Path) -> None:
    job = running("a", [0])
    bed = Bed(tmp_path, [spec("a", 20 * GIB)], [job])
    bed.probe({"a": {0: 7 * GIB}})
    del bed.ledger.jobs["a"]
    bed.probe({})
    assert bed.book.usage == {} and bed.book.family_peak == {}


def test_after_a_restart_the_finished_attempts_peaks_are_learned_once(tmp_path: Path) -> None:
    done = running("done", [0], peak=6 * GIB)
    done.status = JobStatus.COMPLETED
    retried = running("retried", [0], n=2, peak=None)
    retried.history.insert(0, Attempt(n=1, host="h", gpus=[0], session="s", attempt_dir="d",
                                      log="l", peak_mib=8 * GIB, end=5.0))
    live = running("live", [1], peak=12 * GIB)  # still running: not finished, not learned
    bed = Bed(tmp_path, [spec("done"), spec("retried"), spec("live")], [done, retried, live])
    bed.probe({})
    assert bed.book.family_peak == {"fam": 8 * GIB}
    bed.book.family_peak.clear()
    bed.probe({})
    assert bed.book.family_peak == {}  # read once


def test_the_plan_is_none_unless_some_job_is_placed_by_memory(tmp_path: Path) -> None:
    bed = Bed(tmp_path, [spec("a", None)], [])
    assert bed.book.plan() is None
    bed.ledger.specs["b"] = spec("b", 10 * GIB)
    assert bed.book.plan() is None  # the answer holds until the specs change
    bed.ledger.specs_version += 1
    plan = bed.book.plan()
    assert plan is not None and plan.now == 1000.0 and set(plan.specs) == {"a", "b"}
    assert plan.usage is bed.book.usage and plan.family_peak is bed.book.family_peak


def test_memory_placement_is_on_for_a_size_or_a_job_without_gpus() -> None:
    assert not uses_memory_placement([spec("a", None)])
    assert uses_memory_placement([spec("a", None), spec("b", 1)])
    assert uses_memory_placement([spec("a", None, gpus_per_job=0)])
    assert not uses_memory_placement([])


def test_levelling_waits_longer_without_an_estimate_or_far_below_it() -> None:
    assert not levelled(None, 10, 1e9) and not levelled(Usage(1, peak=0), 10, 1e9)
    grown = Usage(1, peak=900, grew_at=100.0)
    assert levelled(grown, None, 100.0 + LEVEL_UNKNOWN_S)
    assert not levelled(grown, None, 100.0 + LEVEL_UNKNOWN_S - 0.5)
