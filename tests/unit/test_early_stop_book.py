"""Early stopping in the engine (engine/tick/early_stop.py) over a real ledger and bus: the reports
read from the log bytes a probe followed, the rule applied to each (decide/pruning.py), a report
made at the whole job's end never judged, the judging again as others reach a rung, and what a
pruned job's record and event say. The probes are HostSnapshots as a host returns them; stopping
a session is the engine's to do, so a loser's stop is recorded here (or refused, as a host
would)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eq_tui.api.events import Alert, Event, JobPruned, JobStateChanged
from eq_tui.api.model import Attempt, Failure, JobState, JobStatus
from eq_tui.engine.decide.pruning import Entry, judge
from eq_tui.engine.tick.early_stop import FOLLOW_BYTES, EarlyStop
from eq_tui.errors import HostError
from eq_tui.hosts.base import AttemptProbe, AttemptRef, HostSnapshot
from eq_tui.manifest.model import (
    EarlyStopSpec,
    HostSpec,
    JobSpec,
    Manifest,
    MetricsSpec,
    PhaseSpec,
    ResultsSpec,
)
from tests.support.context_bed import context

ASHA = EarlyStopSpec(metric="val_acc", goal="max")


class Bed:
    """Rivals that made their reports earlier, and running jobs whose logs the test writes."""

    def __init__(self, tmp_path: Path, spec: EarlyStopSpec | None = ASHA,
                 rivals: dict[str, list[float]] | None = None) -> None:
        self.jobs: dict[str, JobState] = {}
        self.specs: list[JobSpec] = []
        for name, reports in (rivals or {}).items():
            self.add(name, "train --epochs 9", JobStatus.COMPLETED, reports=reports)
        self.tmp_path = tmp_path
        self.spec = spec
        self.stopped: list[tuple[str, str]] = []
        self.refuse = False
        self.logs: dict[str, bytes] = {}

    def add(self, name: str, cmd: str, status: JobStatus = JobStatus.RUNNING, *,
            reports: list[float] | None = None, phase: str = "main",
            metrics: MetricsSpec | None = None) -> JobState:
        job = JobState(id=name, phase=phase, cmd=cmd, status=status, attempts=1,
                       params={"lr": name, "seed": "1"}, reports=list(reports or []),
                       reports_attempt=1)
        job.history.append(Attempt(n=1, host="h", gpus=[0], session=f"s-{name}",
                                   attempt_dir="d", log="l", start=0.0))
        self.jobs[name] = job
        self.specs.append(JobSpec(id=name, phase=phase, cmd=cmd, metrics=metrics))
        return job

    def start(self, phases: tuple[PhaseSpec, ...] | None = None) -> EarlyStop:
        manifest = Manifest(project="p", source="m.yaml", jobs=tuple(self.specs),
                            hosts=(HostSpec(name="h"),),
                            phases=phases or (PhaseSpec(name="main", results=ResultsSpec(
                                early_stop=self.spec)),))
        self.ctx = context(self.tmp_path, manifest, list(self.jobs.values()))
        self.events: asyncio.Queue[Event] = self.ctx.bus.subscribe()
        self.book = EarlyStop(self.ctx, self.stop)
        return self.book

    async def stop(self, job: JobState, reason: str) -> None:
        if self.refuse:
            raise HostError("h: connection refused")
        self.stopped.append((job.id, reason))

    async def write(self, lines: dict[str, str], *, probed: set[str] | None = None) -> None:
        """Each job's log grows by its lines; one probe of h follows every running job's log
        from where it was read to."""
        for name, text in lines.items():
            self.logs[name] = self.logs.get(name, b"") + text.encode()
        attempts = {}
        for name, job in self.jobs.items():
            if job.status != JobStatus.RUNNING:
                continue
            offset = job.reports_offset if job.reports_attempt == job.attempts else 0
            attempts[name] = AttemptProbe(
                key=name, session_alive=True, pid=1, pid_alive=True, started=0.0,
                exit_code=None, exited_at=None, log_size=len(self.logs.get(name, b"")),
                output_ok=None, followed=self.logs.get(name, b"")[offset:offset + FOLLOW_BYTES],
                followed_from=offset)
        self.ctx.hosts["h"].snapshot = HostSnapshot(host="h", ok=True, taken_at=0.0,
                                                    attempts=attempts)
        await self.book.check({"h"} if probed is None else probed)

    def pruned(self) -> list[JobPruned]:
        out = []
        while not self.events.empty():
            event = self.events.get_nowait()
            if isinstance(event, JobPruned):
                out.append(event)
        return out


GOOD = {"r1": [0.8, 0.85, 0.9], "r2": [0.8, 0.85, 0.9], "r3": [0.8, 0.85, 0.9]}


async def test_a_report_made_at_the_whole_jobs_end_is_never_judged(tmp_path: Path) -> None:
    """Its third report is asha's rung 3 and the worst there, but it is made at epoch 3 of 3:
    the job is finishing anyway. The same report at epoch 3 of 4 stops it."""
    bed = Bed(tmp_path, rivals=GOOD)
    last = bed.add("last", "train --epochs 3")
    early = bed.add("early", "train --epochs 4")
    bed.start()
    await bed.write({name: f"epoch 1/{n} val_acc=0.9\nepoch 2/{n} val_acc=0.9\n"
                     for name, n in (("last", 3), ("early", 4))})
    assert bed.stopped == []
    await bed.write({"last": "epoch 3/3 val_acc=0.1\n", "early": "epoch 3/4 val_acc=0.1\n"})
    assert [name for name, _ in bed.stopped] == ["early"]
    assert last.status == JobStatus.RUNNING and last.reports == [0.9, 0.9, 0.1]
    assert early.status == JobStatus.PRUNED
    # later probes judge it no more: neither its last report nor its rung, as others arrive
    bed.add("late", "train --epochs 9")
    bed.logs["late"] = b""
    bed.book.ctx.ledger.jobs["late"] = bed.jobs["late"]
    await bed.write({"late": "epoch 1/9 val_acc=0.95\nepoch 2/9 val_acc=0.95\n"
                             "epoch 3/9 val_acc=0.95\n"})
    assert [name for name, _ in bed.stopped] == ["early"]
    assert last.status == JobStatus.RUNNING


async def test_an_evaluation_bar_at_100_percent_is_no_end(tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    bed.add("x", "train --max_steps 1000")
    bed.start()
    evaluation = "100%|██████████| 8/8 [00:00<00:00, 30.12it/s]\n"
    await bed.write({"x": f"{evaluation}val_acc=0.1\n"})
    assert [name for name, _ in bed.stopped] == ["x"]


async def test_a_loser_is_stopped_recorded_and_told(tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    job = bed.add("x", "train --epochs 9")
    bed.start()
    await bed.write({"x": "epoch 1/9 val_acc=0.5\n"})
    reason = "pruned at report 1: val_acc 0.5, rung cutoff 0.8 (top 1/3 of 4)"
    assert bed.stopped == [("x", reason)]
    assert (job.status, job.reason, job.failure, job.retry_at) == (JobStatus.PRUNED, reason,
                                                                   None, None)
    [event] = bed.pruned()
    assert (event.job, event.phase, event.host, event.attempt, event.metric, event.step,
            event.value, event.cutoff, event.rivals, event.rule, event.detail) == (
        "x", "main", "h", 1, "val_acc", 1, 0.5, 0.8, 3, "asha", reason)


async def test_a_stop_the_host_refuses_is_an_alert_and_the_job_runs_on(tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    job = bed.add("x", "train --epochs 9")
    bed.start()
    bed.refuse = True
    await bed.write({"x": "epoch 1/9 val_acc=0.5\n"})
    assert job.status == JobStatus.RUNNING
    [alert] = [a for a in bed.ctx.bus.alerts if a["type"] == Alert.type]
    assert alert["level"] == "warning" and alert["job"] == "x" and alert["host"] == "h"
    assert alert["message"] == ("x: pruned at report 1: val_acc 0.5, rung cutoff 0.8 "
                                "(top 1/3 of 4), but its session could not be stopped: "
                                "h: connection refused")


async def test_a_job_that_ended_while_its_session_was_stopped_keeps_its_end(
        tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    job = bed.add("x", "train --epochs 9")
    bed.start()

    async def ends_meanwhile(stopping: JobState, reason: str) -> None:
        bed.ctx.ledger.set_status(stopping, JobStatus.COMPLETED)

    bed.book.stop_session = ends_meanwhile
    await bed.write({"x": "epoch 1/9 val_acc=0.5\n"})
    assert job.status == JobStatus.COMPLETED and job.reason is None
    assert bed.pruned() == []


async def test_reports_come_from_whole_lines_from_where_the_log_was_read_to(
        tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    job = bed.add("x", "train --epochs 9")
    bed.start()
    await bed.write({"x": "epoch 1/9 val_acc=0.9\nepoch 2/9 val_a"})  # a line half written
    assert job.reports == [0.9] and job.reports_offset == len("epoch 1/9 val_acc=0.9\n")
    await bed.write({"x": "cc=0.91\r"})  # a carriage return ends a line too
    assert job.reports == [0.9, 0.91]
    assert job.reports_offset == len(bed.logs["x"])
    # a probe that followed from elsewhere (an older request) adds nothing
    probe = AttemptProbe(key="x", session_alive=True, pid=1, pid_alive=True, started=0.0,
                         exit_code=None, exited_at=None, log_size=0, output_ok=None,
                         followed=b"epoch 3/9 val_acc=0.2\n", followed_from=3)
    bed.ctx.hosts["h"].snapshot = HostSnapshot(host="h", ok=True, taken_at=0.0,
                                               attempts={"x": probe})
    await bed.book.check({"h"})
    assert job.reports == [0.9, 0.91]
    # a probe not followed, or a host not probed this tick, or one that failed
    await bed.write({"x": "epoch 3/9 val_acc=0.2\n"}, probed={"g"})
    bed.ctx.hosts["h"].snapshot = HostSnapshot(host="h", ok=False, taken_at=0.0,
                                               attempts={"x": probe})
    await bed.book.check({"h"})
    assert job.reports == [0.9, 0.91] and bed.stopped == []


async def test_a_line_longer_than_a_probe_carries_is_skipped(tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    job = bed.add("x", "train --epochs 9")
    bed.start()
    await bed.write({"x": "x" * (FOLLOW_BYTES - 1)})
    assert job.reports_offset == 0  # may still end within the next probe's bytes
    await bed.write({"x": "x" * 10})
    assert job.reports_offset == FOLLOW_BYTES  # no end in a whole probe's bytes: past it
    await bed.write({"x": "x\nepoch 1/9 val_acc=0.9\n"})
    assert job.reports == [0.9]


async def test_a_new_attempt_starts_its_reports_over(tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    job = bed.add("x", "train --epochs 9")
    bed.start()
    # a bare figure counts once per change: its redraw is no new report
    await bed.write({"x": "loss=0.3 val_acc=0.95\nval_acc=0.95\n"})
    assert job.reports == [0.95]
    assert bed.book.names_seen["x"] == (1, {"loss": 1, "val_acc": 1})
    job.attempts = 2
    job.history.append(Attempt(n=2, host="h", gpus=[0], session="s2", attempt_dir="d2",
                               log="l2", start=5.0))
    assert bed.book.offsets([AttemptRef("x", "s2", "d2", None)]) == (("x", 0),)
    bed.logs["x"] = b""
    await bed.write({"x": "val_acc=0.95\n"})  # the same figure, in a new attempt's log
    assert (job.reports, job.reports_attempt) == ([0.95], 2)
    assert bed.book.names_seen["x"] == (2, {"val_acc": 1})


async def test_an_attempt_resumed_from_a_checkpoint_goes_on_from_its_reports(
        tmp_path: Path) -> None:
    """Attempt 1 reported epochs 1-3 and died; attempt 2 resumed from the epoch-2 checkpoint
    and prints epoch 3 again, then 4: epoch 3 counts once (its new report), the steps go on
    (no rung judged twice). A resumed attempt whose position is unknown keeps every report it
    carried; an attempt that did not resume starts over."""
    bed = Bed(tmp_path)  # alone: never a loser
    job = bed.add("x", "train --epochs 9")
    bed.start()
    await bed.write({"x": "epoch 1/9 val_acc=0.5\nepoch 2/9 val_acc=0.6\n"
                          "epoch 3/9 val_acc=0.7\n"})
    assert job.reports == [0.5, 0.6, 0.7]
    assert job.report_fractions == [pytest.approx(1 / 9), pytest.approx(2 / 9),
                                    pytest.approx(3 / 9)]

    def resume(n: int, resumed_from: str | None) -> None:
        job.attempts = n
        job.history.append(Attempt(n=n, host="h", gpus=[0], session=f"s{n}",
                                   attempt_dir=f"d{n}", log=f"l{n}", start=5.0,
                                   resumed_from=resumed_from))
        bed.logs["x"] = b""

    resume(2, "ckpt/epoch-2.pt")
    await bed.write({"x": "resumed\n"})  # no report yet: what it carries stands
    assert (job.reports, job.reports_attempt, job.reports_carried) == ([0.5, 0.6, 0.7], 2, 3)
    await bed.write({"x": "epoch 3/9 val_acc=0.7\nepoch 4/9 val_acc=0.75\n"})
    assert job.reports == [0.5, 0.6, 0.7, 0.75]
    assert job.report_fractions == [pytest.approx(k / 9) for k in (1, 2, 3, 4)]
    assert bed.stopped == []
    # a resume whose lines say no position: the carried reports all stand
    resume(3, "ckpt/epoch-4.pt")
    await bed.write({"x": "val_acc=0.8\n"})
    assert job.reports == [0.5, 0.6, 0.7, 0.75, 0.8]
    # a restart from scratch starts its reports over
    resume(4, None)
    await bed.write({"x": "epoch 1/9 val_acc=0.5\n"})
    assert (job.reports, job.reports_carried) == ([0.5], 0)
    assert job.report_fractions == [pytest.approx(1 / 9)]


async def test_a_resume_from_an_earlier_checkpoint_drops_the_reports_it_makes_again(
        tmp_path: Path) -> None:
    """Attempt 1 reported epochs 1-3; attempt 2 resumed from the epoch-1 checkpoint: at its
    first own report (epoch 2) the carried reports of epochs 2 and 3 go, and its own take their
    place, once each."""
    bed = Bed(tmp_path)
    job = bed.add("x", "train --epochs 9")
    bed.start()
    await bed.write({"x": "epoch 1/9 val_acc=0.5\nepoch 2/9 val_acc=0.6\n"
                          "epoch 3/9 val_acc=0.7\n"})
    job.attempts = 2
    job.history.append(Attempt(n=2, host="h", gpus=[0], session="s2", attempt_dir="d2",
                               log="l2", start=5.0, resumed_from="ckpt/epoch-1.pt"))
    bed.logs["x"] = b""
    await bed.write({"x": "epoch 2/9 val_acc=0.61\n"})
    assert job.reports == [0.5, 0.61]
    assert job.report_fractions == [pytest.approx(1 / 9), pytest.approx(2 / 9)]
    await bed.write({"x": "epoch 3/9 val_acc=0.71\nepoch 4/9 val_acc=0.76\n"})
    assert job.reports == [0.5, 0.61, 0.71, 0.76]
    # resumed from the newest checkpoint: every carried report was made before it, all stay
    job.attempts = 3
    job.history.append(Attempt(n=3, host="h", gpus=[0], session="s3", attempt_dir="d3",
                               log="l3", start=9.0, resumed_from="ckpt/epoch-4.pt"))
    bed.logs["x"] = b""
    await bed.write({"x": "epoch 5/9 val_acc=0.8\n"})
    assert job.reports == [0.5, 0.61, 0.71, 0.76, 0.8]


async def test_a_restarted_engine_goes_on_from_the_last_report_kept(tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    job = bed.add("x", "train --epochs 9", reports=[0.9])
    bed.start()
    bed.logs["x"] = b"val_acc=0.9\n"
    job.reports_offset = 0  # its last line is read again: the same report, not a new one
    await bed.write({"x": "val_acc=0.91\n"})
    assert job.reports == [0.9, 0.91]
    assert "x" in bed.ctx.ledger.changed_ids


async def test_the_end_of_the_run_may_come_from_its_command(tmp_path: Path) -> None:
    """`epoch 3` of `--epochs 3`: the run's end though its line states no total."""
    bed = Bed(tmp_path, rivals=GOOD)
    job = bed.add("x", "train --epochs 3")
    bed.start()
    await bed.write({"x": "epoch 1 val_acc=0.9\nepoch 2 val_acc=0.9\nepoch 3 val_acc=0.1\n"})
    assert bed.stopped == [] and job.status == JobStatus.RUNNING


async def test_the_first_losing_report_of_a_probe_stops_it(tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    bed.add("x", "train --epochs 9")
    bed.start()
    await bed.write({"x": "epoch 1/9 val_acc=0.5\nepoch 2/9 val_acc=0.99\n"
                          "epoch 3/9 val_acc=0.2\n"})
    [(_, reason)] = bed.stopped
    assert reason.startswith("pruned at report 1: val_acc 0.5,")


async def test_a_configuration_is_its_grid_point_less_the_seed_within_its_phase(
        tmp_path: Path) -> None:
    bed = Bed(tmp_path)
    good = bed.add("good", "train --epochs 9", JobStatus.COMPLETED, reports=[0.9])
    good.params = {"lr": "0.1", "seed": "1"}
    bad = bed.add("bad", "train --epochs 9")
    bad.params = {"lr": "0.1", "seed": "2"}  # the same configuration: judged on the mean
    other = bed.add("other", "train --epochs 9", JobStatus.COMPLETED, reports=[0.99],
                    phase="b")  # another phase: no rival
    rival = bed.add("rival", "train --epochs 9", JobStatus.COMPLETED, reports=[0.6])
    rival.params = {"lr": "0.3", "seed": "1"}
    assert other.phase == "b"
    early = ResultsSpec(early_stop=ASHA)
    bed.start((PhaseSpec(name="main", results=early), PhaseSpec(name="b", results=early)))
    await bed.write({"bad": "epoch 1/9 val_acc=0.5\n"})
    assert bed.stopped == []  # (0.9 + 0.5) / 2 = 0.7 beats the one rival's 0.6


async def test_jobs_a_probe_tells_of_that_are_not_running_early_stopped_jobs(
        tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    done = bed.add("done", "train --epochs 9", JobStatus.COMPLETED)
    bed.add("lost", "train --epochs 9", phase="gone")  # its phase is not in the manifest
    bed.start()
    bed.ctx.ledger.jobs.pop("r1")
    probes = {key: AttemptProbe(key=key, session_alive=True, pid=1, pid_alive=True,
                                started=0.0, exit_code=None, exited_at=None, log_size=9,
                                output_ok=None, followed=b"val_acc=0.1\n", followed_from=0)
              for key in ("done", "lost", "r1", "nobody")}
    quiet = bed.add("quiet", "train --epochs 9")  # running, its log not followed this time
    bed.ctx.ledger.jobs["quiet"] = quiet
    probes["quiet"] = AttemptProbe(key="quiet", session_alive=True, pid=1, pid_alive=True,
                                   started=0.0, exit_code=None, exited_at=None, log_size=9,
                                   output_ok=None, followed=b"val_acc=0.1\n")
    bed.ctx.hosts["h"].snapshot = HostSnapshot(host="h", ok=True, taken_at=0.0,
                                               attempts=probes)
    await bed.book.check({"h"})
    # a job that ended since the last look has its last lines read (below); the others nothing
    assert done.reports == [0.1]
    assert bed.jobs["lost"].reports == [] and quiet.reports == []
    assert bed.stopped == []
    assert bed.book.spec_for(bed.jobs["lost"]) is None


async def test_which_logs_are_followed(tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    run = bed.add("run", "t")
    run.reports_offset = 42
    bed.add("done", "t", JobStatus.COMPLETED)
    bed.add("to_end", "t").run_to_end = True  # a person retried it after it was pruned
    bed.add("other", "t", phase="eval")
    bed.start((PhaseSpec(name="main", results=ResultsSpec(early_stop=ASHA)),
               PhaseSpec(name="eval")))
    refs = [AttemptRef(k, "s", "d", None) for k in ("run", "done", "to_end", "other", "gone")]
    assert bed.book.offsets(refs) == (("run", 42),)
    assert bed.book.offsets(refs[::-1]) == (("run", 42),)
    # no phase stops early: nothing is followed, nothing is read
    off = Bed(tmp_path / "off", spec=None)
    (tmp_path / "off").mkdir()
    off.add("run", "t").reports_offset = 42
    off.start()
    assert off.book.offsets([AttemptRef("run", "s", "d", None)]) == ()
    await off.write({"run": "val_acc=0.1\n"})
    assert off.jobs["run"].reports == []


async def test_a_job_first_at_a_rung_is_judged_again_as_others_reach_it(
        tmp_path: Path) -> None:
    bed = Bed(tmp_path)
    first = bed.add("first", "train --epochs 9")
    bed.start()
    await bed.write({"first": "epoch 1/9 val_acc=0.3\nepoch 2/9 val_acc=0.4\n"})
    assert bed.stopped == []  # alone at rung 1: it goes on
    second = bed.add("second", "train --epochs 9")
    bed.ctx.ledger.jobs["second"] = second
    await bed.write({"second": "epoch 1/9 val_acc=0.6\n"})
    # second reached rung 1 above it: first is no longer in the best third there
    assert [name for name, _ in bed.stopped] == ["first"]
    assert first.status == JobStatus.PRUNED and second.status == JobStatus.RUNNING
    assert first.reason == ("pruned at report 2: val_acc 0.3, rung cutoff 0.6 "
                            "(top 1/3 of 2) at report 1, as others reached it")
    [event] = bed.pruned()
    assert (event.job, event.step, event.value, event.rivals) == ("first", 1, 0.3, 1)
    # a job pruned by this tick's reports is not judged a second time
    third = bed.add("third", "train --epochs 9")
    bed.ctx.ledger.jobs["third"] = third
    await bed.write({"third": "epoch 1/9 val_acc=0.1\n"})
    assert [name for name, _ in bed.stopped] == ["first", "third"]
    assert third.reason == "pruned at report 1: val_acc 0.1, rung cutoff 0.5 (top 1/3 of 3)"


async def test_median_judges_a_job_that_ran_ahead_again_as_others_reach_its_reports(
        tmp_path: Path) -> None:
    """A diverging job that started first had no rivals at its reports; once another
    configuration reaches them, it is judged again at the furthest report both made (the
    others' report 2, not its own 4) and stopped; the one that caught up goes on."""
    bed = Bed(tmp_path, spec=EarlyStopSpec(metric="val_acc", goal="max", rule="median"))
    ahead = bed.add("ahead", "train --epochs 9")
    bed.start()
    await bed.write({"ahead": "".join(f"epoch {i}/9 val_acc=0.1\n" for i in range(1, 5))})
    assert bed.stopped == []  # no other configuration has a report yet
    rival = bed.add("rival", "train --epochs 9")
    bed.ctx.ledger.jobs["rival"] = rival
    await bed.write({"rival": "epoch 1/9 val_acc=0.5\nepoch 2/9 val_acc=0.6\n"})
    assert [name for name, _ in bed.stopped] == ["ahead"]
    assert ahead.status == JobStatus.PRUNED and rival.status == JobStatus.RUNNING
    assert ahead.reason == ("pruned at report 4: val_acc 0.1, median 0.6 of 1 other "
                            "configurations at report 2, as others reached it")


async def test_a_job_that_ended_between_two_looks_counts_with_its_last_reports(
        tmp_path: Path) -> None:
    """The probe that finds it ended carries its log from the offset read so far: its last
    reports are read, never judged (it ended), and a running rival is judged again against
    them. A job that ended in an earlier attempt keeps the reports of the current one."""
    bed = Bed(tmp_path)
    first = bed.add("first", "train --epochs 9")
    fin = bed.add("fin", "train --epochs 2")
    quiet = bed.add("quiet", "train --epochs 2")
    bed.start()
    await bed.write({"first": "epoch 1/9 val_acc=0.3\nepoch 2/9 val_acc=0.4\n"})
    assert bed.stopped == [] and fin.reports == []
    # fin printed both epochs and exited between two probes; the reconciler has judged it.
    # quiet ended too, printing nothing since the last look (read after fin): it takes
    # nothing back from what fin's reports changed
    bed.ctx.ledger.set_status(fin, JobStatus.COMPLETED)
    bed.ctx.ledger.set_status(quiet, JobStatus.STUCK)
    log = b"epoch 1/2 val_acc=0.6\nepoch 2/2 val_acc=0.1\n"
    bed.ctx.hosts["h"].snapshot = HostSnapshot(host="h", ok=True, taken_at=0.0, attempts={
        "fin": AttemptProbe(key="fin", session_alive=False, pid=1, pid_alive=False,
                            started=0.0, exit_code=0, exited_at=1.0, log_size=len(log),
                            output_ok=None, followed=log, followed_from=0),
        "quiet": AttemptProbe(key="quiet", session_alive=False, pid=1, pid_alive=False,
                              started=0.0, exit_code=1, exited_at=1.0, log_size=0,
                              output_ok=None, followed=b"", followed_from=0)})
    await bed.book.check({"h"})
    assert fin.reports == [0.6, 0.1] and fin.reports_offset == len(log)
    assert fin.status == JobStatus.COMPLETED  # its 0.1 at rung 2 is no verdict: it ended
    # first, alone at rung 1 until now, is below fin's 0.6 there
    assert [name for name, _ in bed.stopped] == ["first"]
    assert first.status == JobStatus.PRUNED
    # a probe of a job ended in another attempt than its reports' reads nothing
    again = bed.add("again", "train --epochs 9", JobStatus.FAILED_OOM, reports=[0.5])
    again.attempts = 2
    bed.ctx.ledger.jobs["again"] = again
    bed.ctx.hosts["h"].snapshot = HostSnapshot(host="h", ok=True, taken_at=0.0, attempts={
        "again": AttemptProbe(key="again", session_alive=False, pid=1, pid_alive=False,
                              started=0.0, exit_code=1, exited_at=1.0, log_size=12,
                              output_ok=None, followed=b"val_acc=0.9\n", followed_from=0)})
    await bed.book.check({"h"})
    assert again.reports == [0.5]


async def test_a_pattern_in_metrics_reads_the_reports(tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    bed.add("x", "train --epochs 9",
            metrics=MetricsSpec(pattern=r"Val accuracy (?P<val_acc>[0-9.]+)%"))
    bed.start()
    await bed.write({"x": "val_acc=0.1\nVal accuracy 85.5% top5\n"})
    assert bed.jobs["x"].reports == [85.5] and bed.stopped == []


def entry(job: str, config: str, *reports: float) -> Entry:
    return Entry(job, ("main", config), list(reports))


@pytest.mark.parametrize("eta", [2, 3, 4])
def test_asha_with_goal_min_keeps_the_lowest_1_over_eta(eta: int) -> None:
    """goal: min — the cutoff is the 1/eta quantile of the others' losses and a job above it
    is the loser (a `goal: max` branch taken for min would keep the worst)."""
    spec = EarlyStopSpec(metric="loss", goal="min", eta=eta)
    losses = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
    rivals = [entry(f"j{i}", f"lr={i}", v) for i, v in enumerate(losses)]
    pos = (len(losses) - 1) / eta
    low = int(pos)
    cutoff = losses[low] + (losses[low + 1] - losses[low]) * (pos - low)
    keep = judge(spec, ("main", "lr=x"), 1, [*rivals, entry("x", "lr=x", cutoff - 0.01)])
    assert keep is None
    at_cutoff = judge(spec, ("main", "lr=x"), 1, [*rivals, entry("x", "lr=x", cutoff)])
    assert at_cutoff is None  # not worse than the cutoff: it goes on
    loser = judge(spec, ("main", "lr=x"), 1, [*rivals, entry("x", "lr=x", cutoff + 0.01)])
    assert loser is not None and loser.cutoff == pytest.approx(cutoff)
    assert loser.reason == (f"pruned at report 1: loss {cutoff + 0.01:.4g}, rung cutoff "
                            f"{cutoff:.4g} (top 1/{eta} of 7)")
    # the best loss goes on, the worst stops
    assert judge(spec, ("main", "lr=x"), 1, [*rivals, entry("x", "lr=x", 0.1)]) is None
    assert judge(spec, ("main", "lr=x"), 1, [*rivals, entry("x", "lr=x", 0.9)]) is not None


def test_asha_with_goal_min_judges_again_the_way_max_does_mirrored() -> None:
    spec_min = EarlyStopSpec(metric="loss", goal="min")
    spec_max = EarlyStopSpec(metric="acc", goal="max")
    values = (0.2, 0.35, 0.5, 0.65)
    for spec, sign in ((spec_min, 1.0), (spec_max, -1.0)):
        rivals = [entry(f"j{i}", f"c={i}", sign * v) for i, v in enumerate(values)]
        verdicts = {v: judge(spec, ("main", "c=x"), 1, [*rivals, entry("x", "c=x", sign * v)])
                    for v in (0.25, 0.4)}
        assert verdicts[0.25] is None and verdicts[0.4] is not None, spec.goal
        assert verdicts[0.4].rivals == 4


def test_what_a_verdict_holds_and_says() -> None:
    spec = EarlyStopSpec(metric="loss", goal="min", rule="median", grace=2)
    rivals = [entry("a", "c=a", 1.0, 0.5), entry("b", "c=b", 1.0, 0.7),
              entry("c", "c=c", 1.0, 0.9), entry("d", "c=d", 1.0, 0.95)]
    mine = [entry("x1", "c=x", 1.0, 0.8), entry("x2", "c=x", 1.0, 1.0)]
    assert judge(spec, ("main", "c=x"), 1, [*rivals, *mine]) is None  # before grace
    verdict = judge(spec, ("main", "c=x"), 2, [*rivals, *mine])
    assert verdict is not None
    assert (verdict.step, verdict.value, verdict.seeds, verdict.cutoff, verdict.rivals) == (
        2, pytest.approx(0.9), 2, pytest.approx(0.8), 4)
    assert verdict.reason == ("pruned at report 2: loss 0.9 (mean of 2 seeds), median 0.8 of "
                              "4 other configurations")
    # a report of inf is shown as inf; a nan one as nan
    inf = judge(spec, ("main", "c=x"), 2, [*rivals, entry("x", "c=x", 1.0, float("inf"))])
    assert inf is not None and "loss inf, median" in inf.reason
    nan = judge(spec, ("main", "c=x"), 2, [*rivals, entry("x", "c=x", 1.0, float("nan"))])
    assert nan is not None and "loss nan, median" in nan.reason and nan.value == float("inf")


def test_a_job_with_fewer_reports_than_the_step_is_no_rival_there() -> None:
    rivals = [entry("a", "c=a", 0.9, 0.9, 0.9), entry("b", "c=b", 0.9)]
    verdict = judge(ASHA, ("main", "c=x"), 3, [*rivals, entry("x", "c=x", 0.5, 0.5, 0.5)])
    assert verdict is not None and verdict.rivals == 1 and verdict.cutoff == 0.9
    # its own jobs that have not made the report yet do not count in its mean
    mine = [entry("x", "c=x", 0.5, 0.5, 0.95), entry("x2", "c=x", 0.1)]
    assert judge(ASHA, ("main", "c=x"), 3, [*rivals, *mine]) is None


def events_of(bed: Bed) -> list[Event]:
    out = []
    while not bed.events.empty():
        out.append(bed.events.get_nowait())
    return out


async def test_what_the_prune_event_and_the_state_change_say(tmp_path: Path) -> None:
    """goal: min, the median rule; the figures rounded to six places; what an earlier attempt
    left on the job (its failure) is cleared."""
    spec = EarlyStopSpec(metric="loss", goal="min", rule="median")
    bed = Bed(tmp_path, spec=spec, rivals={"r1": [0.3], "r2": [0.4], "r3": [1 / 3]})
    job = bed.add("x", "train --epochs 9")
    job.failure = Failure("cuda_oom", "attempt 1 ran out of memory")
    job.retry_at = 5.0
    bed.start()
    bed.ctx.clock.now = 1234.5  # type: ignore[attr-defined]
    await bed.write({"x": "epoch 1/9 loss=0.4123456789\n"})
    reason = "pruned at report 1: loss 0.4123, median 0.3333 of 3 other configurations"
    assert (job.status, job.reason, job.failure, job.retry_at) == (JobStatus.PRUNED, reason,
                                                                   None, None)
    events = events_of(bed)
    [event] = [e for e in events if isinstance(e, JobPruned)]
    assert (event.project, event.at, event.rule, event.value, event.cutoff, event.rivals) == (
        "p", 1234.5, "median", 0.412346, 0.333333, 3)
    [change] = [e for e in events if isinstance(e, JobStateChanged) and e.job == "x"]
    assert (change.old, change.new, change.detail) == ("running", "pruned", reason)


async def test_a_job_not_from_a_grid_is_its_own_configuration(tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    for job in bed.jobs.values():
        job.params = {}
    bed.add("x", "train --epochs 9").params = {}
    bed.start()
    await bed.write({"x": "epoch 1/9 val_acc=0.5\n"})
    assert [name for name, _ in bed.stopped] == ["x"]


async def test_what_is_read_carries_over_from_probe_to_probe(tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    job = bed.add("x", "train --epochs 9")
    bed.start()
    # the same epoch's figure printed again is no new report, though a probe came between
    await bed.write({"x": "epoch 1/9 val_acc=0.9\n"})
    await bed.write({"x": "epoch 1/9 val_acc=0.91\n"})
    assert job.reports == [0.9]
    assert bed.book.names_seen["x"] == (1, {"val_acc": 1})
    await bed.write({"x": "epoch 2/9 val_acc=0.92\n"})
    assert job.reports == [0.9, 0.92]
    assert bed.book.names_seen["x"] == (1, {"val_acc": 2})


async def test_the_end_read_in_one_probe_holds_for_the_report_in_the_next(
        tmp_path: Path) -> None:
    """Keras prints the epoch's end, then its validation on a line of its own: the report
    comes with the next probe, made at the whole job's end all the same."""
    bed = Bed(tmp_path, rivals=GOOD)
    job = bed.add("x", "train --epochs 9")
    bed.start()
    await bed.write({"x": "epoch 1/3 val_acc=0.9\nepoch 2/3 val_acc=0.9\n"
                          "epoch 3/3 loss=0.2\n"})
    await bed.write({"x": "val_acc=0.1\n"})
    assert job.reports == [0.9, 0.9, 0.1] and bed.stopped == []


async def test_lines_end_at_the_last_newline_or_carriage_return_and_bad_bytes_are_read(
        tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    job = bed.add("x", "train --epochs 9")
    bed.start()
    await bed.write({"x": "\n"})  # a blank line is a line
    assert job.reports_offset == 1
    await bed.write({"x": "val_acc=0.95\rval_acc=0.96\r"})
    assert job.reports == [0.95, 0.96] and job.reports_offset == len(bed.logs["x"])
    bed.logs["x"] += b"\xff\xfe "
    await bed.write({"x": "val_acc=0.97\n"})
    assert job.reports == [0.95, 0.96, 0.97]


async def test_a_probe_goes_on_past_jobs_it_does_not_read(tmp_path: Path) -> None:
    bed = Bed(tmp_path, rivals=GOOD)
    done = bed.add("done", "train --epochs 9", JobStatus.COMPLETED)
    done.attempts = 2  # it ended in an attempt whose log is not the one its reports came from
    job = bed.add("x", "train --epochs 9")
    bed.start()
    probe = {key: AttemptProbe(key=key, session_alive=True, pid=1, pid_alive=True, started=0.0,
                               exit_code=None, exited_at=None, log_size=9, output_ok=None,
                               followed=b"epoch 1/9 val_acc=0.95\n", followed_from=0)
             for key in ("nobody", "done", "x")}  # in this order
    bed.ctx.hosts["h"].snapshot = HostSnapshot(host="h", ok=True, taken_at=0.0,
                                               attempts=probe)
    # the hosts probed come in no set order: with many not up, h is read whichever comes first
    await bed.book.check({*(f"down{i}" for i in range(30)), "h"})
    assert job.reports == [0.95] and done.reports == []


async def test_judging_again_goes_on_past_jobs_that_are_not_judged(tmp_path: Path) -> None:
    bed = Bed(tmp_path)
    bed.add("done", "train --epochs 9", JobStatus.COMPLETED)  # before the others, no reports
    bed.add("fresh", "train --epochs 9")  # running, no report yet: no rung
    first = bed.add("first", "train --epochs 9")
    bed.start()
    await bed.write({"first": "epoch 1/9 val_acc=0.3\n"})
    second = bed.add("second", "train --epochs 9")
    bed.ctx.ledger.jobs["second"] = second
    await bed.write({"second": "epoch 1/9 val_acc=0.6\n"})
    assert [name for name, _ in bed.stopped] == ["first"]
    assert first.status == JobStatus.PRUNED


def test_a_rivals_value_is_the_mean_of_its_seeds_and_the_cutoff_itself_goes_on() -> None:
    rivals = [entry("b1", "c=b", 0.6), entry("b2", "c=b", 0.8), entry("c1", "c=c", 0.9)]
    # b's mean 0.7 and c's 0.9: the cutoff of 0.7 and 0.9 at 2/3 is 0.8333
    verdict = judge(ASHA, ("main", "c=x"), 1, [*rivals, entry("x", "c=x", 0.8)])
    assert verdict is not None and verdict.cutoff == pytest.approx(0.7 + 0.2 * 2 / 3)
    # a job at the cutoff exactly is not worse than it, goal max as goal min
    at = judge(ASHA, ("main", "c=x"), 1, [entry("a", "c=a", 0.5), entry("x", "c=x", 0.5)])
    assert at is None


async def test_a_search_trials_reports_are_read_but_left_to_optunas_pruner(
        tmp_path: Path) -> None:
    """A trial job's reports are kept (tick/search_pruning.py tells them to Optuna, whose pruner
    judges the trial), never judged by eq-tui's rule: neither as they come, nor again as a job
    of the phase's grid reports."""
    bed = Bed(tmp_path, rivals=GOOD)
    trial = bed.add("t0", "train --epochs 9")
    trial.origin = "search"
    grid = bed.add("g", "train --epochs 9")
    bed.start()
    await bed.write({"t0": "epoch 1/9 val_acc=0.1\n"})  # the worst at asha's first rung
    assert bed.stopped == [] and trial.reports == [0.1]
    await bed.write({"g": "epoch 1/9 val_acc=0.95\n", "t0": "epoch 2/9 val_acc=0.1\n"})
    assert bed.stopped == [] and grid.reports == [0.95] and trial.reports == [0.1, 0.1]
    # a grid job: eq-tui's rule, as ever (asha's rung 3)
    await bed.write({"g": "epoch 2/9 val_acc=0.05\nepoch 3/9 val_acc=0.05\n"})
    assert [name for name, _ in bed.stopped] == ["g"]
    assert trial.status == JobStatus.RUNNING
