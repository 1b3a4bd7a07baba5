"""The engine's memory book (engine/tick/memory.py MemoryBook): what each running attempt's
processes use, its peak (kept in its record), when its usage has levelled off, what a family of
`mem_mib: auto` jobs learns, and when placement by memory is on at all.

A real ledger, bus and run directory; the probes are HostSnapshots as a host returns them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.engine.decide.placement import ALONE, CPU, Hold, Need
from eq_tui.engine.state.bus import Bus
from eq_tui.engine.state.host_record import HostLink, HostRecord
from eq_tui.engine.state.ledger import Ledger
from eq_tui.engine.state.store import RunDir
from eq_tui.engine.tick.memory import (
    GROWTH_MIB,
    LEVEL_AFTER_S,
    LEVEL_UNKNOWN_S,
    MemoryBook,
    MemoryPlan,
    Usage,
    learned_estimate,
    levelled,
    others_by_gpu,
    usage_by_group,
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
              other: int = 0, unlisted: int = 0, observe: bool = True) -> None:
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
        if observe:
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
    # no job takes no GPU: the scheduler need not sort the queue into GPU and CPU jobs, until
    # one is added (a job added at run time changes the specs' version as well)
    assert not plan.cpu_jobs
    bed.ledger.specs["c"] = spec("c", None, gpus_per_job=0)
    bed.ledger.specs_version += 1
    later = bed.book.plan()
    assert later is not None and later.cpu_jobs


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


# ---- what a running job holds, and what a waiting one needs (MemoryPlan) ------------------------

def plan_for(job: JobState, job_spec: JobSpec, usage: Usage | None) -> MemoryPlan:
    return MemoryPlan({job.id: job_spec}, {job.id: usage} if usage else {}, {}, 1000.0)


def test_a_shared_job_holds_its_estimate_until_it_levels_off_then_what_it_showed() -> None:
    job = running("a", [0], estimate=10 * GIB)
    fresh = Usage(1, now={0: 3 * GIB}, peak=4 * GIB, grew_at=1000.0)
    assert plan_for(job, spec("a", 10 * GIB), fresh).hold(job) == Hold(10 * GIB, {0: 3 * GIB})
    over = Usage(1, now={0: 12 * GIB}, peak=11 * GIB, grew_at=1000.0)
    assert plan_for(job, spec("a", 10 * GIB), over).hold(job) == Hold(12 * GIB, {0: 12 * GIB})
    settled = Usage(1, now={0: 3 * GIB}, peak=9 * GIB, grew_at=1000.0 - LEVEL_AFTER_S)
    assert plan_for(job, spec("a", 10 * GIB), settled).hold(job) == Hold(9 * GIB, {0: 3 * GIB})
    # no usage yet: its estimate
    assert plan_for(job, spec("a", 10 * GIB), None).hold(job) == Hold(10 * GIB, {})


def test_the_first_of_an_auto_family_shares_its_gpu_once_measured() -> None:
    job = running("a", [0])  # alone: no estimate
    settled = Usage(1, now={0: 2 * GIB}, peak=6 * GIB, grew_at=1000.0 - LEVEL_UNKNOWN_S)
    assert plan_for(job, spec("a"), settled).hold(job) == Hold(6 * GIB, {0: 2 * GIB})
    growing = Usage(1, now={0: 2 * GIB}, peak=6 * GIB, grew_at=1000.0 - LEVEL_UNKNOWN_S + 1)
    assert plan_for(job, spec("a"), growing).hold(job) == Hold(None, {0: 2 * GIB})
    assert plan_for(job, spec("a", exclusive=True), settled).hold(job) == \
        Hold(None, {0: 2 * GIB})
    assert plan_for(job, spec("a", 10 * GIB), settled).hold(job) == Hold(None, {0: 2 * GIB})
    job.mem_escalation = 2  # its GPU alone after OOMs: never shared
    assert plan_for(job, spec("a"), settled).hold(job) == Hold(None, {0: 2 * GIB})
    job.mem_escalation = 1
    assert plan_for(job, spec("a"), settled).hold(job) == Hold(6 * GIB, {0: 2 * GIB})


def test_a_job_without_gpus_or_an_attempt_holds_no_gpu() -> None:
    cpu = running("c", [])
    usage = Usage(1, now={0: GIB}, peak=GIB)
    assert plan_for(cpu, spec("c", None, gpus_per_job=0), usage).hold(cpu) == Hold(None,
                                                                                   {0: GIB})
    waiting = JobState(id="w", phase="main", cmd="train")
    assert plan_for(waiting, spec("w"), None).hold(waiting) == Hold(None, {})


def test_levelled_follows_the_attempts_estimate() -> None:
    job = running("a", [0], estimate=10 * GIB)
    near = Usage(1, peak=8 * GIB, grew_at=1000.0 - LEVEL_AFTER_S)
    assert plan_for(job, spec("a"), near).levelled(job)
    far = Usage(1, peak=2 * GIB, grew_at=1000.0 - LEVEL_AFTER_S)
    assert not plan_for(job, spec("a"), far).levelled(job)
    alone = running("b", [0])
    assert not plan_for(alone, spec("b"), near).levelled(alone)  # unknown: LEVEL_UNKNOWN_S


def test_a_waiting_jobs_need() -> None:
    job = JobState(id="a", phase="main", cmd="train")
    plan = MemoryPlan({}, {}, {"fam": 8 * GIB}, 1000.0)
    assert plan.need(job, spec("a", None, gpus_per_job=0)) == CPU
    assert plan.need(job, spec("a", None)) == ALONE
    assert plan.need(job, spec("a", 10 * GIB, exclusive=True)) == ALONE
    assert plan.need(job, spec("a", 10 * GIB)) == Need(mib=10 * GIB)
    assert plan.need(job, spec("a")) == Need(mib=learned_estimate(8 * GIB))
    assert MemoryPlan({}, {}, {}, 1000.0).need(job, spec("a")) == ALONE  # nothing measured
    job.history.append(Attempt(n=1, host="h", gpus=[0], session="s", attempt_dir="d",
                               log="l", peak_mib=9 * GIB))
    assert plan.need(job, spec("a")) == Need(mib=learned_estimate(9 * GIB))  # its own peak
    job.mem_escalation = 1
    assert plan.need(job, spec("a", 10 * GIB)) == Need(mib=15 * GIB)
    assert plan.need(job, spec("a", 10 * GIB + 1)) == Need(mib=15 * GIB + 2)  # rounded up
    job.mem_escalation = 2
    assert plan.need(job, spec("a", 10 * GIB)) == ALONE


# ---- the edges of measuring and learning ----------------------------------------------------

def snapshot(procs: list[GpuProcess], used: tuple[int | None, ...] = (0, 0)) -> HostSnapshot:
    gpus = tuple(GpuReading(i, f"GPU-{i}", "Sim", u, 80 * GIB, 0) for i, u in enumerate(used))
    return HostSnapshot("h", True, 0.0, gpus=gpus, processes=tuple(procs))


def test_processes_on_an_unknown_gpu_or_without_a_reading_count_nowhere() -> None:
    snap = snapshot([GpuProcess(1, "GPU-9", 500, pgid=7, sid=7),
                     GpuProcess(2, "GPU-0", None, pgid=7, sid=7),
                     GpuProcess(3, "GPU-0", 300, pgid=7, sid=8),
                     GpuProcess(4, "GPU-1", 200, pgid=5, sid=5)], used=(900, 200))
    assert usage_by_group(snap) == {7: {0: 300}, 8: {0: 300}, 5: {1: 200}}
    # GPU 0: 300 listed (not ours), 600 no process accounts for; GPU 1: ours
    assert others_by_gpu(snap, {1: 200}) == {0: 900, 1: 0}


def test_others_skip_a_gpu_without_a_reading_and_count_all_listed_when_none_is_ours() -> None:
    snap = snapshot([GpuProcess(4, "GPU-1", 200, pgid=5, sid=5)], used=(None, 200))
    assert others_by_gpu(snap, {}) == {1: 200}


def test_levelling_at_the_boundaries() -> None:
    assert levelled(Usage(1, peak=1, grew_at=0.0), None, LEVEL_UNKNOWN_S)
    near = Usage(1, peak=3000, grew_at=0.0)  # exactly NEAR_ESTIMATE of 4000
    assert levelled(near, 4000, LEVEL_AFTER_S)


def test_a_failed_probe_does_not_stop_the_next_hosts_measure(tmp_path: Path) -> None:
    bed = Bed(tmp_path, [spec("a", 20 * GIB)], [running("a", [0])])
    bed.hosts["g"].snapshot = HostSnapshot("g", False, 0.0)
    bed.probe({"a": {0: GIB}}, observe=False)
    bed.book.observe(["g", "h"])
    assert bed.book.usage["a"].now == {0: GIB}


def test_two_of_our_jobs_on_one_gpu_are_both_ours(tmp_path: Path) -> None:
    bed = Bed(tmp_path, [spec("a", 20 * GIB), spec("b", 20 * GIB)],
              [running("a", [0]), running("b", [0])])
    bed.probe({"a": {0: 2 * GIB}, "b": {0: 3 * GIB}})
    assert bed.book.others["h"] == {0: 0, 1: 0}


def test_an_attempt_with_no_gpu_process_yet_shows_nothing_and_teaches_nothing(
        tmp_path: Path) -> None:
    bed = Bed(tmp_path, [spec("a")], [running("a", [0])])
    bed.probe({"a": {}})
    usage = bed.book.usage["a"]
    assert (usage.now, usage.peak, usage.mark) == ({}, 0, 0)
    bed.clock.now += LEVEL_UNKNOWN_S * 10
    bed.probe({"a": {}})
    assert bed.book.family_peak == {} and usage.peak == 0


def test_the_first_growth_marks_its_size_even_below_growth_mib(tmp_path: Path) -> None:
    bed = Bed(tmp_path, [spec("a", 20 * GIB)], [running("a", [0])])
    bed.probe({"a": {0: 100}})
    assert bed.book.usage["a"].mark == 100


def test_the_first_growth_past_a_recorded_peak_restarts_the_levelling_clock(
        tmp_path: Path) -> None:
    job = running("a", [0], n=2, peak=6 * GIB)
    bed = Bed(tmp_path, [spec("a", 20 * GIB)], [job])
    bed.probe({"a": {0: 6 * GIB}})  # as much as recorded: not growth
    usage = bed.book.usage["a"]
    assert (usage.grew_at, usage.mark) == (1000.0, 0)
    bed.clock.now = 1050.0
    bed.probe({"a": {0: 6 * GIB + 1}})
    assert (usage.grew_at, usage.mark, usage.peak) == (1050.0, 6 * GIB + 1, 6 * GIB + 1)


def test_a_recorded_peak_of_zero_is_rewritten_at_growth_mib(tmp_path: Path) -> None:
    job = running("a", [0], peak=0)
    bed = Bed(tmp_path, [spec("a", 20 * GIB)], [job])
    bed.probe({"a": {0: GROWTH_MIB}})
    assert job.history[-1].peak_mib == GROWTH_MIB


def test_an_ended_attempt_keeps_the_larger_recorded_peak_and_writes_only_a_change(
        tmp_path: Path) -> None:
    job = running("a", [0], peak=9 * GIB)
    bed = Bed(tmp_path, [spec("a")], [job])
    bed.book.usage["a"] = Usage(1, peak=7 * GIB)
    job.status = JobStatus.COMPLETED
    bed.probe({})
    assert job.history[-1].peak_mib == 9 * GIB and "a" not in bed.ledger.changed_ids
    same = running("b", [0], peak=7 * GIB)
    bed2 = Bed(tmp_path / "2", [spec("b")], [same])
    bed2.book.usage["b"] = Usage(1, peak=7 * GIB)
    same.status = JobStatus.COMPLETED
    bed2.probe({})
    assert "b" not in bed2.ledger.changed_ids and bed2.book.family_peak == {"fam": 7 * GIB}
    tiny = running("c", [0])
    bed3 = Bed(tmp_path / "3", [spec("c")], [tiny])
    bed3.book.usage["c"] = Usage(1, peak=1)
    tiny.status = JobStatus.COMPLETED
    bed3.probe({})
    assert tiny.history[-1].peak_mib == 1 and bed3.book.family_peak == {"fam": 1}


def test_usage_of_an_attempt_the_job_no_longer_lists_still_teaches_its_family(
        tmp_path: Path) -> None:
    job = running("a", [0], n=2)
    bed = Bed(tmp_path, [spec("a")], [job])
    bed.book.usage["a"] = Usage(7, peak=5 * GIB)
    job.status = JobStatus.COMPLETED
    bed.probe({})
    assert bed.book.family_peak == {"fam": 5 * GIB} and job.history[-1].peak_mib is None


def test_only_auto_jobs_with_a_definition_teach_their_family(tmp_path: Path) -> None:
    fixed, unknown = running("f", [0]), running("u", [1])
    bed = Bed(tmp_path, [spec("f", 20 * GIB)], [fixed, unknown])
    bed.book.usage.update({"f": Usage(1, peak=5 * GIB), "u": Usage(1, peak=5 * GIB)})
    fixed.status = unknown.status = JobStatus.COMPLETED
    bed.probe({})
    assert bed.book.family_peak == {}


def test_a_finished_jobs_last_attempt_is_learned_after_a_restart(tmp_path: Path) -> None:
    done = running("done", [0], peak=6 * GIB)  # its last attempt has no end written
    done.status = JobStatus.COMPLETED
    bed = Bed(tmp_path, [spec("done")], [done])
    bed.probe({})
    assert bed.book.family_peak == {"fam": 6 * GIB}


def test_the_plan_is_worked_out_for_the_specs_version_it_first_sees(tmp_path: Path) -> None:
    bed = Bed(tmp_path, [spec("a", 10 * GIB)], [])
    bed.ledger.specs_version = 1  # changed before the first tick asked
    assert bed.book.plan() is not None


def test_a_job_never_measured_needs_its_gpu_alone_and_one_without_an_attempt_has_no_estimate(
) -> None:
    job = JobState(id="a", phase="main", cmd="train")
    job.history.append(Attempt(n=1, host="h", gpus=[0], session="s", attempt_dir="d", log="l"))
    assert MemoryPlan({}, {}, {}, 1000.0).need(job, spec("a")) == ALONE
    fresh = JobState(id="w", phase="main", cmd="train")
    usage = {"w": Usage(1, peak=GIB, grew_at=0.0)}
    assert MemoryPlan({}, usage, {}, LEVEL_UNKNOWN_S).levelled(fresh)
    assert not MemoryPlan({}, usage, {}, LEVEL_UNKNOWN_S - 1).levelled(fresh)


def test_an_attempt_whose_session_never_started_holds_nothing() -> None:
    job = running("a", [0], estimate=10 * GIB)
    job.history[-1].launched = False
    usage = Usage(1, now={}, peak=0)
    assert plan_for(job, spec("a", 10 * GIB), usage).hold(job) == Hold(None, {})
