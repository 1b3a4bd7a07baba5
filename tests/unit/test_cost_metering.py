"""The metering's inner parts (engine/tick/cost.py): an interval cut at the last start or end of
one of our attempts on a GPU (`segments`), each reading's power on its side of that moment
(`step_watts`), when that moment was (`change_times`), and an attempt metered probe by probe
on a real ledger (`CostBook`): a job's start and end are steps in its GPU's power, a shared
GPU's shares add up to the card, and the part of an interval after an attempt's end is taken
back once its end is read. Every figure is worked out by hand in the comments."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.tick.cost import (
    CostBook,
    Readings,
    change_times,
    gpu_shares,
    interval_watts,
    segments,
    step_watts,
)
from eq_tui.hosts.base import AttemptProbe, GpuProcess, GpuReading, HostSnapshot
from eq_tui.manifest.model import HostSpec, JobSpec, Manifest
from tests.support.context_bed import Clock, context

# ---- the pure parts ----------------------------------------------------------------------


def test_an_interval_with_no_change_is_one_part_at_the_mean_of_its_two_shares() -> None:
    held, fresh = {0: 0.8, 1: 0.3}, {0: 0.4}
    assert segments(held, fresh, 0, 10.0, 20.0, None, True) == [(10.0, pytest.approx(0.6),
                                                                  None)]
    # a change outside the interval is no change in it
    assert segments(held, fresh, 0, 10.0, 20.0, 9.0, True) == [(10.0, pytest.approx(0.6),
                                                                 None)]
    assert segments(held, fresh, 0, 10.0, 20.0, 21.0, True) == [(10.0, pytest.approx(0.6),
                                                                  None)]
    # one probe lacks its share: the other's, both halves
    assert segments(held, fresh, 1, 10.0, 20.0, None, True) == [(10.0, 0.3, None)]
    assert segments({}, fresh, 0, 10.0, 20.0, None, True) == [(10.0, 0.4, None)]
    # neither has one, or it was placed alone: the whole GPU, whatever the shares say
    assert segments({}, {}, 0, 10.0, 20.0, None, True) == [(10.0, 1.0, None)]
    assert segments(held, fresh, 0, 10.0, 20.0, None, False) == [(10.0, 1.0, None)]


def test_a_change_cuts_the_interval_opening_share_before_closing_share_after() -> None:
    held, fresh = {0: 0.8}, {0: 0.4}
    assert segments(held, fresh, 0, 10.0, 20.0, 14.0, True) == [(4.0, 0.8, 0), (6.0, 0.4, 1)]
    # at either end of the interval it is still a cut (an attempt metered from its own start)
    assert segments(held, fresh, 0, 10.0, 20.0, 10.0, True) == [(0.0, 0.8, 0), (10.0, 0.4, 1)]
    assert segments(held, fresh, 0, 10.0, 20.0, 20.0, True) == [(10.0, 0.8, 0), (0.0, 0.4, 1)]
    # alone on its GPU: cut all the same (the power steps there), all of it its own
    assert segments({}, {}, 0, 10.0, 20.0, 14.0, False) == [(4.0, 1.0, 0), (6.0, 1.0, 1)]


def test_each_side_of_a_change_draws_its_own_readings_power() -> None:
    prior, reading = (10.0, 60.0, None), (20.0, 300.0, None)
    assert step_watts(prior, reading, 180.0) == (60.0, 300.0)
    # a side without a power reading: the interval's mean
    assert step_watts((10.0, None, None), reading, 300.0) == (300.0, 300.0)
    assert step_watts(prior, (20.0, None, None), 60.0) == (60.0, 60.0)
    # the energy counter gave the mean: it already knows where the power stepped
    assert step_watts((10.0, 60.0, 1000.0), (20.0, 300.0, 2500.0), 150.0) == (150.0, 150.0)
    # one counter alone is no counter: the readings' own
    assert step_watts((10.0, 60.0, 1000.0), (20.0, 300.0, None), 180.0) == (60.0, 300.0)
    assert step_watts((10.0, 60.0, None), (20.0, 300.0, 2500.0), 180.0) == (60.0, 300.0)
    # the first reading of a GPU, or none now: the mean both sides
    assert step_watts(None, reading, 300.0) == (300.0, 300.0)
    assert step_watts(prior, None, None) == (None, None)


def attempt(n: int = 1, gpus: tuple[int, ...] = (0,), start: float | None = None,
            end: float | None = None, shared: bool = False, host: str = "h") -> Attempt:
    return Attempt(n=n, host=host, gpus=list(gpus), session=f"s{n}", attempt_dir="d", log="l",
                   start=start, end=end, shared=shared, estimate_mib=1000 if shared else None)


def holding(job_id: str, current: Attempt) -> JobState:
    return JobState(id=job_id, phase="main", cmd="train", status=JobStatus.RUNNING,
                    attempts=current.n, history=[current])


def test_the_change_is_the_last_start_or_end_of_ours_on_the_gpu_since_its_last_reading(
        ) -> None:
    before: Readings = {0: (10.0, 100.0, None), 1: (10.0, 100.0, None)}
    jobs = [holding("a", attempt(start=12.0, end=17.0)),
            holding("b", attempt(gpus=(0, 1), start=15.0)),
            holding("c", attempt(gpus=(2,), start=13.0)),  # GPU 2 had no reading before
            holding("d", attempt(gpus=(1,), start=5.0, end=20.0)),  # at the closing probe
            holding("e", attempt(gpus=(1,), start=10.0)),  # at the opening probe
            JobState(id="never", phase="main", cmd="train")]
    assert change_times(jobs, before, 20.0) == {0: 17.0, 1: 15.0}
    # the order the jobs come in does not matter: the last one
    assert change_times(jobs[::-1], before, 20.0) == {0: 17.0, 1: 15.0}
    assert change_times(jobs, {}, 20.0) == {}


# ---- metering, probe by probe, on a real ledger -----------------------------------------


def test_an_interval_with_the_same_counter_reading_drew_nothing() -> None:
    assert interval_watts((10.0, 100.0, 5000.0), (12.0, 300.0, 5000.0)) == 0.0
    # two readings at one time say nothing of a rate: the power readings instead
    assert interval_watts((10.0, 100.0, 5000.0), (10.0, 300.0, 5100.0)) == 200.0


def test_without_per_process_readings_a_shared_gpu_is_split_by_memory() -> None:
    snap = HostSnapshot(host="h", ok=True, taken_at=0.0,
                        gpus=(GpuReading(0, "G0", "sim", 9000, 24576, 90, 250.0),),
                        processes=(proc(1, 0, None, 6000), proc(2, 0, None, 2000),
                                   GpuProcess(3, "G0", None, pgid=2, util_pct=None),
                                   GpuProcess(4, "G9", 5000, pgid=1, util_pct=90)))
    assert gpu_shares(snap, {0: ["a", "b"]}, {"a": 1, "b": 2}) == {"a": {0: 0.75},
                                                                   "b": {0: 0.25}}
    # by utilisation where one reads it, a process without a reading counting none
    snap = HostSnapshot(host="h", ok=True, taken_at=0.0, gpus=snap.gpus,
                        processes=(proc(1, 0, 60, 6000), proc(2, 0, None, 2000),
                                   proc(5, 0, 20, 1000)))
    assert gpu_shares(snap, {0: ["a", "b"]}, {"a": 1, "b": 2}) == {"a": {0: 0.75},
                                                                   "b": {0: 0.0}}
    # a job kept no share at the last probe: the split starts afresh, equally
    empty = HostSnapshot(host="h", ok=True, taken_at=0.0, gpus=snap.gpus)
    assert gpu_shares(empty, {0: ["a", "b"]}, {"a": 1, "b": 2}, {"a": {0: 0.9}}) == {
        "a": {0: 0.5}, "b": {0: 0.5}}


class Meter:
    """Hosts `h` and `g` with two GPUs each, probed by hand: each probe's readings and
    processes."""

    def __init__(self, tmp_path: Path, jobs: list[JobState]) -> None:
        specs = tuple(JobSpec(id=job.id, phase="main", cmd="train") for job in jobs)
        manifest = Manifest(project="p", source="m.yaml", jobs=specs,
                            hosts=(HostSpec(name="h"), HostSpec(name="g")))
        self.clock = Clock()
        self.ctx = context(tmp_path, manifest, jobs, self.clock)
        self.book = CostBook(self.ctx)
        self.jobs = {job.id: job for job in jobs}

    def probe(self, at: float, watts: tuple[float | None, ...] = (200.0, 60.0), *,
              energy: tuple[float | None, ...] = (None, None),
              procs: tuple[GpuProcess, ...] = (), rtt: float | None = None,
              ok: bool = True, unasked: tuple[str, ...] = (), host: str = "h",
              also: tuple[str, ...] = ()) -> None:
        gpus = tuple(GpuReading(i, f"G{i}", "sim", 1000, 24576, 50, power_w=w, energy_j=e)
                     for i, (w, e) in enumerate(zip(watts, energy, strict=True)))
        pgids = {job_id: 10 * (n + 1) for n, job_id in enumerate(self.jobs)}
        attempts = {job_id: AttemptProbe(key=job_id, session_alive=True, pid=pgid,
                                         pid_alive=True, started=None, exit_code=None,
                                         exited_at=None, log_size=0, output_ok=None, pgid=pgid)
                    for job_id, pgid in pgids.items() if job_id not in unasked
                    and self.jobs[job_id].history[-1].host == host}
        self.ctx.hosts[host].snapshot = HostSnapshot(
            host=host, ok=ok, taken_at=at, rtt_s=rtt, gpus=gpus, processes=procs,
            attempts=attempts)
        self.clock.now = at
        self.book.observe([*also, host])

    def end(self, job_id: str, at: float) -> None:
        job = self.jobs[job_id]
        assert job.current is not None
        job.current.close(at)
        self.ctx.ledger.set_status(job, JobStatus.COMPLETED)

    def figures(self, job_id: str) -> tuple[float | None, float, float | None]:
        current = self.jobs[job_id].current
        assert current is not None
        return current.energy_j, current.shared_off_s, current.metered_until


def proc(pid: int, gpu: int, util: int | None, mib: int = 1000, *,
         sid: int | None = None) -> GpuProcess:
    return GpuProcess(pid=pid, gpu_uuid=f"G{gpu}", used_mib=mib, pgid=pid, sid=sid,
                      util_pct=util)


def test_a_job_alone_on_its_gpu_steps_its_power_at_its_start_and_its_end(
        tmp_path: Path) -> None:
    meter = Meter(tmp_path, [holding("a", attempt(start=1002.0))])
    meter.probe(1000.0, (60.0, 60.0))  # before its start: nothing to meter yet
    assert meter.figures("a") == (None, 0.0, None)
    # it started at 1002: 60 W before it, 300 W from then on (not the trapezoid's 180 W)
    meter.probe(1010.0, (300.0, 60.0))
    assert meter.figures("a") == (8 * 300.0, 0.0, 1010.0)
    meter.probe(1070.0, (300.0, 60.0))
    assert meter.figures("a") == (2400.0 + 60 * 300.0, 0.0, 1070.0)
    # it ended at 1075: 300 W up to its end (the GPU went idle after it, at 60 W)
    meter.end("a", 1075.0)
    meter.probe(1080.0, (60.0, 60.0))
    assert meter.figures("a") == (20400.0 + 5 * 300.0, 0.0, 1075.0)
    # an ended attempt is metered no further
    meter.probe(1090.0, (500.0, 60.0))
    assert meter.figures("a") == (21900.0, 0.0, 1075.0)


def test_a_probes_time_is_halfway_through_its_round_trip(tmp_path: Path) -> None:
    meter = Meter(tmp_path, [holding("a", attempt(start=1000.0))])
    meter.probe(1000.0)  # at its very start: nothing yet, not even a zero
    assert meter.figures("a") == (None, 0.0, None) and meter.book.last == {}
    meter.probe(1010.0, rtt=4.0)
    assert meter.figures("a") == (12 * 200.0, 0.0, 1012.0)
    meter.probe(1020.0, ok=False)  # a failed probe meters nothing
    assert meter.figures("a") == (2400.0, 0.0, 1012.0)


def test_the_energy_counter_gives_the_mean_and_a_gpu_without_power_leaves_a_gap(
        tmp_path: Path) -> None:
    meter = Meter(tmp_path, [holding("a", attempt(gpus=(0, 1), start=1000.0))])
    meter.probe(1000.0, (100.0, 100.0), energy=(5000.0, None))
    # GPU 0: its counter grew 3000 J in 10 s (300 W) whatever the two readings say
    meter.probe(1010.0, (100.0, 100.0), energy=(8000.0, None))
    assert meter.figures("a") == (3000.0 + 10 * 100.0, 0.0, 1010.0)
    # GPU 1 stops reading power: an interval with one reading takes that one's ...
    meter.probe(1020.0, (100.0, None), energy=(9000.0, None))
    current = meter.jobs["a"].current
    assert current is not None and current.energy_gap is False  # a flag: never None
    assert meter.figures("a") == (4000.0 + 1000.0 + 1000.0, 0.0, 1020.0)
    # ... one with none leaves the energy unknown from here on, never a smaller figure
    meter.probe(1030.0, (100.0, None), energy=(10000.0, None))
    assert current.energy_gap


def test_a_job_with_no_power_reading_ever_has_no_energy_figure(tmp_path: Path) -> None:
    meter = Meter(tmp_path, [holding("a", attempt(start=1000.0))])
    meter.probe(1000.0, (None, None))
    meter.probe(1010.0, (None, None))
    current = meter.jobs["a"].current
    assert current is not None and current.energy_gap
    assert meter.figures("a") == (None, 0.0, 1010.0)


def test_the_shares_of_a_shared_gpu_add_up_to_the_card(tmp_path: Path) -> None:
    x = holding("x", attempt(start=1000.0, shared=True))  # its processes: group 10
    y = holding("y", attempt(start=1000.0, shared=True))  # group 20
    meter = Meter(tmp_path, [x, y])
    meter.probe(1000.0, procs=(proc(10, 0, 75), proc(20, 0, 25)))
    # 1000-1010 at 200 W: the mean of the two probes' shares (0.75 then 0.5)
    meter.probe(1010.0, procs=(proc(10, 0, 50), proc(20, 0, 50)))
    assert meter.figures("x") == (6.25 * 200.0, 3.75, 1010.0)
    assert meter.figures("y") == (3.75 * 200.0, 6.25, 1010.0)
    # y ends at 1014 and the card drops to 100 W: before it, the opening shares (0.5 each)
    # at 200 W; after it, x alone at 100 W
    meter.end("y", 1014.0)
    meter.probe(1020.0, (100.0, 60.0), procs=(proc(10, 0, 80),))
    assert meter.figures("y") == (750.0 + 4 * 0.5 * 200.0, 6.25 + 2.0, 1014.0)
    assert meter.figures("x") == (1250.0 + 4 * 0.5 * 200.0 + 6 * 100.0, 3.75 + 2.0, 1020.0)
    # the card drew 4 s x 200 W + 6 s x 100 W in that interval: the two parts are all of it
    joules = [meter.figures(j)[0] for j in ("x", "y")]
    assert sum(j or 0.0 for j in joules) - 2000.0 == pytest.approx(800.0 + 600.0)
    # what is kept for the next probe: x's share as of now, none for y
    assert meter.book.shares == {"x": (1, {0: 1.0})}


def test_a_process_of_the_jobs_session_counts_as_its_own(tmp_path: Path) -> None:
    x = holding("x", attempt(start=1000.0, shared=True))
    meter = Meter(tmp_path, [x, holding("y", attempt(start=1000.0, shared=True))])
    # x's second process left its group (setsid'd workers keep the session)
    procs = (proc(10, 0, 30), proc(99, 0, 30, sid=10), proc(20, 0, 40))
    meter.probe(1000.0, procs=procs)
    meter.probe(1010.0, procs=procs)
    assert meter.figures("x") == (pytest.approx(6 * 200.0), pytest.approx(4.0), 1010.0)


def test_what_is_taken_back_when_the_end_is_read_after_the_processes_were_gone(
        tmp_path: Path) -> None:
    """A probe found y's processes gone before its exit record and metered it to that probe;
    the probe that reads its end takes back the part after it, at the closing reading's power
    at y's share there (not the interval's mean), and the GPU-seconds that were not its own
    in that part."""
    x = holding("x", attempt(start=1000.0, shared=True))
    y = holding("y", attempt(start=1000.0, shared=True))
    meter = Meter(tmp_path, [x, y])
    meter.probe(1000.0, procs=(proc(10, 0, 50), proc(20, 0, 50)))
    meter.probe(1010.0, procs=(proc(10, 0, 50), proc(20, 0, 50)))
    assert meter.figures("y") == (1000.0, 5.0, 1010.0)
    # 1010-1020: y's processes are gone (share 0.5 then 0), still running: 0.25 of 150 W
    meter.probe(1020.0, (100.0, 60.0), procs=(proc(10, 0, 80),))
    assert meter.figures("y") == (1000.0 + 10 * 0.25 * 150.0, 5.0 + 7.5, 1020.0)
    assert meter.book.last["y"] == (10.0, 375.0, 7.5, 0.25 * 150.0)
    # its end (1014) is read now: 6 of those 10 s were after it
    meter.end("y", 1014.0)
    meter.probe(1030.0, (100.0, 60.0), procs=(proc(10, 0, 80),))
    assert meter.figures("y") == (pytest.approx(1375.0 - 0.25 * 150.0 * 10 * 0.6),
                                  pytest.approx(12.5 - 7.5 * 0.6), 1014.0)
    assert "y" not in meter.book.last and "y" not in meter.book.shares


def test_a_take_back_after_a_change_is_at_the_closing_power_and_share(tmp_path: Path) -> None:
    """y had GPU 0 to itself at 100 W; x joined at 1012 and the card drew 260 W from then on,
    y a quarter of it. y's end (1016) is read a probe late: the 4 s after it are taken back at
    y's quarter of 260 W, not at the interval's mean (which the 100 W before the change
    lowers)."""
    y = holding("y", attempt(start=1000.0, shared=True))  # its processes: group 10
    x = holding("x", attempt(start=1012.0, shared=True))  # group 20
    meter = Meter(tmp_path, [y, x])
    meter.probe(1000.0, (100.0, 60.0), procs=(proc(10, 0, 90),))
    meter.probe(1010.0, (100.0, 60.0), procs=(proc(10, 0, 90),))
    assert meter.figures("y") == (1000.0, 0.0, 1010.0)
    meter.probe(1020.0, (260.0, 60.0), procs=(proc(10, 0, 20), proc(20, 0, 60)))
    # y: 2 s alone at 100 W, then 8 s at a quarter of 260 W; x: three quarters from 1012
    assert meter.figures("y") == (1000.0 + 200.0 + 520.0, 6.0, 1020.0)
    assert meter.figures("x") == (8 * 0.75 * 260.0, 2.0, 1020.0)
    assert meter.book.last["y"] == (10.0, 720.0, 6.0, 0.25 * 260.0)
    meter.end("y", 1016.0)
    meter.probe(1030.0, (200.0, 60.0), procs=(proc(20, 0, 60),))
    assert meter.figures("y") == (pytest.approx(1720.0 - 0.25 * 260.0 * 4),
                                  pytest.approx(6.0 - 6.0 * 0.4), 1016.0)


def test_nothing_is_taken_back_from_an_attempt_metered_only_to_its_end(tmp_path: Path) -> None:
    meter = Meter(tmp_path, [holding("a", attempt(start=1000.0))])
    meter.probe(1000.0)
    meter.probe(1010.0)
    meter.end("a", 1010.0)  # it ended at the very probe that metered it last
    meter.probe(1020.0, (60.0, 60.0))
    assert meter.figures("a") == (2000.0, 0.0, 1010.0)


def test_a_take_back_never_takes_more_than_the_interval_gave(tmp_path: Path) -> None:
    # a restarted engine: the last interval is not known, so nothing is taken back
    meter = Meter(tmp_path, [holding("a", attempt(start=1000.0))])
    meter.probe(1000.0, (100.0, 60.0))
    meter.probe(1010.0, (100.0, 60.0))
    meter.book.last.clear()
    meter.end("a", 1005.0)
    meter.probe(1020.0, (100.0, 60.0))
    assert meter.figures("a")[:2] == (1000.0, 0.0)
    # a closing power far above the interval's mean: at most the interval's joules go
    for n, (joules, off, left) in enumerate([(400.0, 3.0, (600.0, 7.0)),
                                             (5000.0, 12.0, (0.0, 0.0))]):
        (tmp_path / str(n)).mkdir()
        other = Meter(tmp_path / str(n), [holding("b", attempt(start=1000.0, shared=True))])
        for at in (1000.0, 1010.0, 1020.0):
            other.probe(at, (100.0, 60.0), procs=(proc(10, 0, 50), proc(99, 0, 50)))
        assert other.figures("b")[:2] == (1000.0, 10.0)
        other.book.last["b"] = (10.0, joules, off, 500.0)
        # it ended before that interval began (two probes found it gone): all of it goes
        other.end("b", 1005.0)
        other.probe(1030.0, (100.0, 60.0))
        assert other.figures("b") == (*left, 1005.0)


def test_a_running_attempts_figures_are_written_once_a_minute_and_at_its_end(
        tmp_path: Path) -> None:
    meter = Meter(tmp_path, [holding("a", attempt(start=1000.0))])
    ledger = meter.ctx.ledger
    written = []
    for at in (1000.0, 1030.0, 1059.0, 1060.0, 1100.0, 1119.0, 1121.0):
        ledger.changed_ids.clear()
        meter.probe(at)
        written.append("a" in ledger.changed_ids)
    assert written == [False, False, False, True, False, False, True]
    ledger.changed_ids.clear()
    meter.end("a", 1125.0)
    ledger.changed_ids.clear()
    meter.probe(1126.0)
    assert "a" in ledger.changed_ids


def test_an_attempt_that_never_started_is_not_metered(tmp_path: Path) -> None:
    never = attempt(start=1000.0)
    never.launched = False
    meter = Meter(tmp_path, [holding("a", never), holding("b", attempt(start=None))])
    meter.probe(1000.0)
    meter.probe(1010.0)
    assert meter.figures("a") == (None, 0.0, None)
    assert meter.figures("b") == (None, 0.0, None)


def test_every_active_attempt_is_metered_whether_or_not_the_probe_asked_of_it(
        tmp_path: Path) -> None:
    """The request was built before a launch came back: the probe did not ask of the new
    attempt, and it is metered all the same (on the host's readings)."""
    meter = Meter(tmp_path, [holding("a", attempt(start=1000.0))])
    meter.probe(1000.0, unasked=("a",))
    meter.probe(1010.0, unasked=("a",))
    assert meter.figures("a") == (2000.0, 0.0, 1010.0)
    meter.book.observe(["elsewhere"])  # a host with no record: nothing to meter
    assert meter.figures("a") == (2000.0, 0.0, 1010.0)


def test_an_attempt_no_longer_active_is_metered_to_this_probe_and_forgotten(
        tmp_path: Path) -> None:
    """Its session was lost (no exit record, so no end): metered to the probe that found it so,
    by its last shares, and nothing of it kept for the next probe."""
    x = holding("x", attempt(start=1000.0, shared=True))
    y = holding("y", attempt(start=1000.0, shared=True))
    meter = Meter(tmp_path, [x, y])
    meter.probe(1000.0, procs=(proc(10, 0, 80), proc(20, 0, 20)))
    meter.ctx.ledger.set_status(x, JobStatus.STUCK)
    meter.probe(1010.0, procs=(proc(20, 0, 90),))
    assert meter.figures("x") == (10 * 0.8 * 200.0, pytest.approx(2.0), 1010.0)
    assert set(meter.book.shares) == {"y"} and "x" not in meter.book.last
    # y shares the GPU with nobody of ours now: all of it from its own processes
    assert meter.book.shares["y"] == (1, {0: 1.0})


def test_each_host_is_metered_against_its_own_last_readings(tmp_path: Path) -> None:
    meter = Meter(tmp_path, [holding("a", attempt(start=1000.0)),
                             holding("b", attempt(start=1000.0, host="g"))])
    for at in (1000.0, 1010.0):
        meter.probe(at, (200.0, 60.0))
        meter.probe(at, (100.0, 60.0), host="g")
    assert meter.figures("a") == (2000.0, 0.0, 1010.0)
    assert meter.figures("b") == (1000.0, 0.0, 1010.0)
    # a host with no record, or no probe yet, named first does not stop the others' metering
    meter.probe(1020.0, (200.0, 60.0), also=("elsewhere",))
    meter.ctx.hosts["g"].snapshot = None
    meter.probe(1030.0, (200.0, 60.0), also=("g",))
    assert meter.figures("a") == (6000.0, 0.0, 1030.0)


def test_a_sample_in_which_nobody_computed_keeps_the_last_split_on_each_gpu(
        tmp_path: Path) -> None:
    x = holding("x", attempt(gpus=(0, 1), start=1000.0, shared=True))
    y = holding("y", attempt(gpus=(0, 1), start=1000.0, shared=True))
    meter = Meter(tmp_path, [x, y])
    computing = tuple(proc(pid, gpu, util) for gpu in (0, 1)
                      for pid, util in ((10, 90), (20, 10)))
    meter.probe(1000.0, (100.0, 100.0), procs=computing)
    idle = tuple(proc(pid, gpu, 0) for gpu in (0, 1) for pid in (10, 20))
    meter.probe(1010.0, (100.0, 100.0), procs=idle)
    # 0.9 and 0.1 on each GPU, kept through the sample with no computing, 10 s at 100 W each
    assert meter.figures("x") == (pytest.approx(1800.0), pytest.approx(2.0), 1010.0)
    assert meter.figures("y") == (pytest.approx(200.0), pytest.approx(18.0), 1010.0)
    assert meter.book.shares["y"] == (1, {0: pytest.approx(0.1), 1: pytest.approx(0.1)})


def test_the_least_utilisation_or_memory_still_splits_a_gpu() -> None:
    snap = HostSnapshot(host="h", ok=True, taken_at=0.0,
                        gpus=(GpuReading(0, "G0", "sim", 9000, 24576, 1, 250.0),
                              GpuReading(1, "G1", "sim", 9000, 24576, 0, 250.0)))
    one_pct = replace(snap, processes=(proc(1, 0, 1, 6000), proc(2, 0, 0, 2000)))
    assert gpu_shares(one_pct, {0: ["a", "b"]}, {"a": 1, "b": 2},
                      {"a": {0: 0.5}, "b": {0: 0.5}}) == {"a": {0: 1.0}, "b": {0: 0.0}}
    assert gpu_shares(one_pct, {0: ["a", "b"]}, {"a": 1, "b": 2}) == {"a": {0: 1.0},
                                                                     "b": {0: 0.0}}
    one_mib = replace(snap, processes=(proc(1, 0, 0, 1), proc(2, 0, 0, 0)))
    assert gpu_shares(one_mib, {0: ["a", "b"]}, {"a": 1, "b": 2}) == {"a": {0: 1.0},
                                                                     "b": {0: 0.0}}
    # a share of nothing kept through an idle sample stays nothing, on every GPU
    idle = replace(snap, processes=(proc(1, 0, 0), proc(2, 0, 0), proc(1, 1, 0),
                                    proc(2, 1, 0)))
    assert gpu_shares(idle, {0: ["a", "b"], 1: ["a", "b"]}, {"a": 1, "b": 2},
                      {"a": {0: 1.0, 1: 0.25}, "b": {0: 0.0, 1: 0.75}}) == {
        "a": {0: 1.0, 1: 0.25}, "b": {0: 0.0, 1: 0.75}}


def test_an_attempt_that_never_started_does_not_stop_the_others_metering(
        tmp_path: Path) -> None:
    """The jobs of a probe come in no set order: with many attempts whose session never
    started, the one that did is metered whichever comes first."""
    never = [holding(f"n{i}", attempt(start=1000.0)) for i in range(30)]
    for job in never:
        assert job.current is not None
        job.current.launched = False
    meter = Meter(tmp_path, [*never, holding("a", attempt(start=1000.0))])
    meter.probe(1000.0)
    meter.probe(1010.0)
    assert meter.figures("a") == (2000.0, 0.0, 1010.0)


def test_an_attempt_that_failed_between_probes_takes_no_share_of_its_gpu(
        tmp_path: Path) -> None:
    y = holding("y", attempt(start=1000.0, shared=True))
    x = holding("x", attempt(start=1003.0, end=1004.0, shared=True))
    x.status = JobStatus.STUCK
    meter = Meter(tmp_path, [y, x])
    meter.probe(1000.0)  # nothing on the GPU yet: y alone there
    meter.probe(1010.0)
    assert meter.figures("y") == (2000.0, 0.0, 1010.0)
    assert meter.book.shares == {"y": (1, {0: 1.0})}


def test_a_shared_attempt_the_probe_did_not_ask_of_finds_no_process_of_its_own(
        tmp_path: Path) -> None:
    x = holding("x", attempt(start=1000.0, shared=True))
    y = holding("y", attempt(start=1000.0, shared=True))
    meter = Meter(tmp_path, [x, y])
    procs = (proc(10, 0, 50), proc(20, 0, 50))
    meter.probe(1000.0, procs=procs, unasked=("x",))
    meter.probe(1010.0, procs=procs, unasked=("x",))
    assert meter.figures("x") == (0.0, 10.0, 1010.0)
    assert meter.figures("y") == (1000.0, 5.0, 1010.0)


def test_a_gpu_the_probe_no_longer_lists_leaves_a_gap(tmp_path: Path) -> None:
    meter = Meter(tmp_path, [holding("a", attempt(gpus=(0, 2), start=1000.0))])
    meter.probe(1000.0)
    meter.probe(1010.0)
    current = meter.jobs["a"].current
    assert current is not None and current.energy_gap
    assert meter.figures("a") == (2000.0, 0.0, 1010.0)


def test_a_start_between_counter_readings_takes_the_counters_mean_both_sides(
        tmp_path: Path) -> None:
    meter = Meter(tmp_path, [holding("a", attempt(start=1004.0))])
    meter.probe(1000.0, (60.0, 60.0), energy=(1000.0, None))
    meter.probe(1010.0, (300.0, 60.0), energy=(3000.0, None))
    assert meter.figures("a") == (6 * 200.0, 0.0, 1010.0)


def test_a_card_reading_zero_watts_gave_nothing(tmp_path: Path) -> None:
    meter = Meter(tmp_path, [holding("a", attempt(start=1000.0))])
    meter.probe(1000.0, (0.0, 0.0))
    meter.probe(1010.0, (0.0, 0.0))
    assert meter.figures("a") == (0.0, 0.0, 1010.0)
    # a take back at a closing reading of 0 W takes nothing of what came before the change
    x = holding("x", attempt(start=1000.0, shared=True))
    y = holding("y", attempt(start=1000.0, shared=True))
    (tmp_path / "b").mkdir()
    both = Meter(tmp_path / "b", [x, y])
    both.probe(1000.0, (100.0, 0.0), procs=(proc(10, 0, 50), proc(20, 0, 50)))
    both.probe(1010.0, (100.0, 0.0), procs=(proc(10, 0, 50), proc(20, 0, 50)))
    both.end("x", 1012.0)
    both.probe(1020.0, (0.0, 0.0), procs=(proc(20, 0, 50),))
    assert both.figures("y") == (500.0 + 2 * 0.5 * 100.0, 5.0 + 1.0, 1020.0)
    both.end("y", 1015.0)
    both.probe(1030.0, (0.0, 0.0))
    assert both.figures("y") == (600.0, pytest.approx(5.5), 1015.0)


def test_a_take_back_on_several_gpus_adds_them_up(tmp_path: Path) -> None:
    x = holding("x", attempt(gpus=(0, 1), start=1000.0, shared=True))
    y = holding("y", attempt(gpus=(0, 1), start=1000.0, shared=True))
    meter = Meter(tmp_path, [x, y])
    procs = tuple(proc(pid, gpu, util) for gpu in (0, 1) for pid, util in ((10, 75), (20, 25)))
    meter.probe(1000.0, (100.0, 200.0), procs=procs)
    meter.probe(1010.0, (100.0, 200.0), procs=procs)
    # a quarter of each GPU: its own 2.5 s of each, 7.5 s of each not its own
    assert meter.figures("y") == (pytest.approx(250.0 + 500.0), pytest.approx(15.0), 1010.0)
    assert meter.book.last["y"] == (10.0, pytest.approx(750.0), pytest.approx(15.0),
                                    pytest.approx(25.0 + 50.0))
    meter.end("y", 1005.0)
    meter.probe(1020.0, (100.0, 200.0), procs=procs[:1] + procs[2:3])
    assert meter.figures("y") == (pytest.approx(375.0), pytest.approx(7.5), 1005.0)


@pytest.mark.parametrize(("last", "over"), [(1.0, 0.5), (0.5, 0.25)])
def test_a_short_overrun_or_a_short_interval_is_taken_back_too(tmp_path: Path, last: float,
                                                              over: float) -> None:
    meter = Meter(tmp_path, [holding("a", attempt(start=1000.0))])
    meter.probe(1000.0, (100.0, 60.0))
    meter.probe(1010.0, (100.0, 60.0))
    meter.probe(1010.0 + last, (100.0, 60.0))
    meter.end("a", 1010.0 + last - over)
    meter.probe(1020.0, (100.0, 60.0))
    assert meter.figures("a") == (pytest.approx(100.0 * (10.0 + last - over)), 0.0,
                                  1010.0 + last - over)


def test_what_is_not_its_own_is_taken_back_when_it_drew_nothing(tmp_path: Path) -> None:
    """y's processes were gone for its whole last interval (its share nothing), so that
    interval gave it no joules, only GPU-seconds not its own: those are taken back too."""
    x = holding("x", attempt(start=1000.0, shared=True))
    y = holding("y", attempt(start=1000.0, shared=True))
    meter = Meter(tmp_path, [x, y])
    meter.probe(1000.0, procs=(proc(10, 0, 80),))
    meter.probe(1010.0, procs=(proc(10, 0, 80),))
    assert meter.figures("y") == (0.0, 10.0, 1010.0)
    meter.end("y", 1004.0)
    meter.probe(1020.0, procs=(proc(10, 0, 80),))
    assert meter.figures("y") == (0.0, pytest.approx(4.0), 1004.0)


def test_a_new_attempt_counts_its_minute_from_its_own_start(tmp_path: Path) -> None:
    job = holding("a", attempt(start=1000.0))
    meter = Meter(tmp_path, [job])
    meter.probe(1000.0)
    meter.probe(1050.0)
    meter.end("a", 1055.0)
    meter.probe(1060.0)
    job.history.append(attempt(n=2, start=1100.0))
    job.attempts = 2
    meter.ctx.ledger.set_status(job, JobStatus.RUNNING)
    meter.probe(1100.0)
    meter.ctx.ledger.changed_ids.clear()
    meter.probe(1130.0)
    assert "a" not in meter.ctx.ledger.changed_ids
    assert meter.figures("a") == (6000.0, 0.0, 1130.0)


def test_a_job_the_probe_asked_of_whose_attempt_was_dropped_is_passed_over(
        tmp_path: Path) -> None:
    """The probe asked of b's attempt, whose launch was then refused (a claim: the attempt is
    dropped, b is pending with no attempt at all): the book meters x and passes b over."""
    x = holding("x", attempt(start=1000.0, shared=True))
    b = JobState(id="b", phase="main", cmd="train", status=JobStatus.PENDING)
    meter = Meter(tmp_path, [x])
    meter.ctx.ledger.jobs["b"] = b
    meter.probe(1000.0, procs=(proc(10, 0, 50),))
    snap = meter.ctx.hosts["h"].snapshot
    assert snap is not None
    asked = AttemptProbe(key="b", session_alive=False, pid=None, pid_alive=False, started=None,
                         exit_code=None, exited_at=None, log_size=0, output_ok=None)
    meter.ctx.hosts["h"].snapshot = replace(snap, taken_at=1010.0,
                                            attempts={**snap.attempts, "b": asked})
    meter.clock.now = 1010.0
    meter.book.observe(["h"])
    assert meter.figures("x") == (2000.0, 0.0, 1010.0)
    assert b.current is None
