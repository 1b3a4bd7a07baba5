"""The resume verdict can fail: hand-made host records of restarts that break the promise
(from scratch with a checkpoint there, an older checkpoint than the newest) are flagged; those
that keep it, or start from scratch where no checkpoint is, are not; the GPU time lost is what
the records say."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from tests.chaos.resumes import (
    REBOOT_GRACE_S,
    ResumeReport,
    check_resumes,
    checkpoints_at,
    processes,
)
from tests.chaos.verdict import host_runs

SHARED = {"h1": "work", "h2": "work"}
APART = {"h1": "disk1", "h2": "disk2"}
Rec = dict[str, Any]


def start(job: str, t: float, pid: int, attempt: int, from_epoch: int = 1,
          gpus: Iterable[int] = (0,)) -> Rec:
    resume = None if from_epoch == 1 else f"ckpt/{job}/epoch-{from_epoch - 1}.pt"
    return {"event": "start", "job": job, "attempt": attempt, "pid": pid, "gpu": 0,
            "gpus": list(gpus), "t": t, "exec_t": t, "from_epoch": from_epoch, "resume": resume}


def epochs(job: str, pid: int, attempt: int, done: Mapping[int, float]) -> list[Rec]:
    """An epoch record and, 10 ms later, its checkpoint record, for each epoch -> when."""
    out: list[Rec] = []
    for epoch, t in done.items():
        base = {"job": job, "attempt": attempt, "pid": pid, "epoch": epoch}
        out += [{"event": "epoch", **base, "t": t},
                {"event": "checkpoint", **base, "path": f"/w/ckpt/{job}/epoch-{epoch}.pt",
                 "t": t + 0.01}]
    return out


def end(job: str, t: float, pid: int, attempt: int, code: int = 1) -> Rec:
    return {"event": "end", "job": job, "attempt": attempt, "pid": pid, "gpu": 0, "t": t,
            "exit": code, "linger_until": None}


def judge(by_host: Mapping[str, list[Rec]], disk_of: Mapping[str, str],
          files: Mapping[str, Mapping[tuple[str, int], float]],
          reboots: Mapping[str, list[float]] | None = None,
          windows: Mapping[str, list[tuple[float, float]]] | None = None) -> ResumeReport:
    procs = []
    for host, records in by_host.items():
        runs = host_runs(host, records, (reboots or {}).get(host, []), now=1000)
        procs += processes(host, records, runs)
    return check_resumes(procs, disk_of, files, windows)


def killed_after_two(host: str = "h1") -> list[Rec]:
    """Attempt 1 of j saves epochs 1 and 2 (at 11 and 12), then is rebooted away at 12.5."""
    return [start("j", 10, 1, 1), *epochs("j", 1, 1, {1: 11, 2: 12})]


def files_of(*epochs_: int, mtime: float = 12.5) -> dict[tuple[str, int], float]:
    return {("j", e): mtime for e in epochs_}


def test_a_restart_from_the_newest_checkpoint_is_fine_and_loses_the_epoch_under_way() -> None:
    report = judge({"h1": [*killed_after_two(), start("j", 15, 2, 2, from_epoch=3)]}, SHARED,
                   {"work": files_of(1, 2)}, reboots={"h1": [12.5]})
    assert (report.restarts, report.resumed, report.from_zero, report.twice_over) == \
        (1, 1, [], [])
    assert report.epochs_twice == 1
    assert report.restarts_by_cause == {"reboot": 1}
    # from the checkpoint it resumed from (saved at 12.01) to the reboot
    assert report.lost_s["reboot"] == pytest.approx(0.49)


def test_a_restart_from_scratch_while_a_checkpoint_was_on_its_disk_is_flagged() -> None:
    records = [*killed_after_two(), start("j", 15, 2, 2, from_epoch=1)]
    report = judge({"h1": records}, SHARED, {"work": files_of(1, 2)}, reboots={"h1": [12.5]})
    assert len(report.from_zero) == 1 and "epoch-2's checkpoint" in report.from_zero[0]
    assert report.resumed == 0 and report.from_zero_none_there == 0
    assert report.lost_s["reboot"] == pytest.approx(2.5)  # nothing of attempt 1 kept


def test_a_restart_from_scratch_on_another_disk_is_fine_and_on_a_shared_one_is_not() -> None:
    by_host = {"h1": killed_after_two(), "h2": [start("j", 15, 7, 2, from_epoch=1)]}
    # the restart wrote its own epochs 1 and 2 on its disk, after it began
    apart = judge(by_host, APART, {"disk1": files_of(1, 2), "disk2": files_of(1, 2, mtime=16)},
                  reboots={"h1": [12.5]})
    assert apart.from_zero == [] and apart.twice_over == []
    assert apart.from_zero_none_there == 1 and apart.epochs_twice == 1
    shared = judge(by_host, SHARED, {"work": files_of(1, 2)}, reboots={"h1": [12.5]})
    assert len(shared.from_zero) == 1 and "j/a2 on h2" in shared.from_zero[0]


def test_two_epochs_run_twice_are_flagged_one_is_not() -> None:
    older = [*killed_after_two(), start("j", 15, 2, 2, from_epoch=2)]  # epoch-1's, not 2's
    report = judge({"h1": older}, SHARED, {"work": files_of(1, 2)}, reboots={"h1": [12.5]})
    # epoch 2 again, and the epoch attempt 1 was in when the reboot came
    assert report.from_zero == [] and report.epochs_twice == 2
    assert len(report.twice_over) == 1 and "2 epochs run twice" in report.twice_over[0]
    assert report.lost_s["reboot"] == pytest.approx(1.49)  # kept only up to epoch 1's save
    # a hung run was in no epoch: resuming one checkpoint short runs one epoch twice
    hung = [*killed_after_two(), {"event": "hang", "job": "j", "attempt": 1, "pid": 1,
                                  "t": 12.1}, end("j", 16, 1, 1, code=143),
            start("j", 17, 2, 2, from_epoch=2)]
    report = judge({"h1": hung}, SHARED, {"work": files_of(1, 2)})
    assert report.twice_over == [] and report.epochs_twice == 1
    assert report.restarts_by_cause == {"stall": 1}


def test_a_restart_past_its_newest_checkpoint_is_flagged() -> None:
    """Resumed from a file its disk did not hold for it (another job's, a clone's source's):
    epochs skipped."""
    records = [*killed_after_two(), start("j", 15, 2, 2, from_epoch=4)]
    report = judge({"h1": records}, SHARED, {"work": files_of(1, 2)}, reboots={"h1": [12.5]})
    assert len(report.skipped) == 1 and "began at epoch 4" in report.skipped[0]
    right = [*killed_after_two(), start("j", 15, 2, 2, from_epoch=3)]
    assert judge({"h1": right}, SHARED, {"work": files_of(1, 2)},
                 reboots={"h1": [12.5]}).skipped == []


def test_a_run_that_failed_after_its_last_epoch_had_none_under_way() -> None:
    """A job that fails after its last epoch (seen in a long run): retried, it resumes from its
    last checkpoint and fails at once with no progress, which the engine takes for a bad
    checkpoint: the next attempt resumes from the one before, running the last epoch again,
    one epoch twice in all."""
    records = [{**start("j", 10, 1, 1), "epochs": 2}, *epochs("j", 1, 1, {1: 11, 2: 12}),
               end("j", 12.1, 1, 1, code=3),
               {**start("j", 20, 2, 2, from_epoch=3), "epochs": 2}, end("j", 20.2, 2, 2, code=3),
               {**start("j", 22, 3, 3, from_epoch=2), "epochs": 2},
               *epochs("j", 3, 3, {2: 23}), end("j", 23.1, 3, 3, code=3)]
    files = {"work": {("j", 1): 11.01, ("j", 2): 23.01}}
    report = judge({"h1": records}, SHARED, files)
    assert report.twice_over == [] and report.epochs_twice == 1 and report.resumed == 2
    # a run that stopped with epochs left was in one
    cut = [{**r, "epochs": 3} if r["event"] == "start" else r for r in records]
    assert len(judge({"h1": cut}, SHARED, files).twice_over) == 1
    # the records of a fake-train that does not say its epochs: as if it had some left
    old = [{k: v for k, v in r.items() if k != "epochs"} for r in records]
    assert len(judge({"h1": old}, SHARED, files).twice_over) == 1
    # ... but one that succeeded had none under way (run again: its exit record was lost)
    done = [start("k", 10, 1, 1), *epochs("k", 1, 1, {1: 11}), end("k", 11.1, 1, 1, code=0),
            start("k", 20, 2, 2, from_epoch=2)]
    assert judge({"h1": done}, SHARED, {"work": {("k", 1): 11.01}}).epochs_twice == 0


def test_the_gpu_time_lost_by_cause() -> None:
    oom_step = [start("j", 10, 1, 1, gpus=(0, 1)), *epochs("j", 1, 1, {1: 11, 2: 12}),
                {"event": "oom", "job": "j", "attempt": 1, "pid": 1, "gpu": 0,
                 "during": "step", "t": 12.2}, end("j", 12.2, 1, 1),
                start("j", 14, 2, 2, from_epoch=3)]
    report = judge({"h1": oom_step}, SHARED, {"work": files_of(1, 2)})
    assert report.restarts_by_cause == {"oom": 1} and report.epochs_twice == 1
    assert report.lost_s == {"oom": pytest.approx((12.2 - 12.01) * 2)}  # on both GPUs
    oom_start = [{"event": "oom", "job": "k", "attempt": 1, "pid": 3, "gpu": 0, "during": "start",
                  "t": 10.0, "exec_t": 9.75, "from_epoch": 1, "resume": None},
                 start("k", 12, 4, 2, from_epoch=1)]
    report = judge({"h1": oom_start}, SHARED, {"work": {}})
    assert report.restarts_by_cause == {"oom": 1} and report.epochs_twice == 0
    assert report.lost_s == {"oom": pytest.approx(0.25)} and report.from_zero_none_there == 1
    stall = [start("s", 10, 5, 1), {"event": "hang", "job": "s", "attempt": 1, "pid": 5,
                                    "t": 10.5}, end("s", 14, 5, 1, code=143),
             start("s", 15, 6, 2, from_epoch=1)]
    assert judge({"h1": stall}, SHARED, {"work": {}}).lost_s == {"stall": pytest.approx(4.0)}


def test_a_run_whose_session_the_reboot_ended_is_charged_to_the_reboot() -> None:
    """A reboot ends the sessions: the job gets SIGHUP and records its end (exit 129) as the
    reboot runs, or up to REBOOT_GRACE_S after it returned."""
    def cause(code: int, at: float) -> dict[str, int]:
        records = [*killed_after_two(), end("j", at, 1, 1, code=code),
                   start("j", 20, 2, 2, from_epoch=3)]
        return dict(judge({"h1": records}, SHARED, {"work": files_of(1, 2)},
                          windows={"h1": [(12.4, 12.6)], "h2": [(12, 13)]}).restarts_by_cause)
    assert cause(129, 12.5) == {"reboot": 1}
    assert cause(137, 12.6 + REBOOT_GRACE_S - 0.01) == {"reboot": 1}
    assert cause(129, 12.4 - 0.01) == {"reboot": 1}  # its clock tick
    assert cause(129, 12.6 + REBOOT_GRACE_S + 0.01) == {"other": 1}
    assert cause(129, 12.3) == {"other": 1}
    assert cause(127, 12.5) == {"other": 1}  # a failure of its own: no signal
    assert cause(128, 12.5) == {"reboot": 1}


def test_a_checkpoint_counts_once_its_file_is_there_before_the_restart() -> None:
    records = killed_after_two()
    runs = host_runs("h1", records, [12.5], now=1000)
    procs = processes("h1", records, runs)
    # saved and still there: both; the file gone (deleted): not there
    assert checkpoints_at("j", 15, "h1", procs, SHARED, {"work": files_of(1, 2)}) == {1, 2}
    assert checkpoints_at("j", 15, "h1", procs, SHARED, {"work": files_of(1)}) == {1}
    # no record of it (the run was killed between its save and the record): the file's mtime
    bare = processes("h1", records[:1], host_runs("h1", records[:1], [12.5], now=1000))
    assert checkpoints_at("j", 15, "h1", bare, SHARED, {"work": files_of(1, 2)}) == {1, 2}
    # a file rewritten after the restart began (by the restart), with no earlier record: not
    assert checkpoints_at("j", 15, "h1", bare, SHARED,
                          {"work": files_of(1, 2, mtime=16)}) == set()
    # saved after the restart began: not yet there
    assert checkpoints_at("j", 11.5, "h1", procs, SHARED, {"work": files_of(1, 2)}) == {1}
    # another job's checkpoint is not this one's
    assert checkpoints_at("x", 15, "h1", procs, SHARED, {"work": files_of(1, 2)}) == set()


def test_runs_without_a_checkpoint_contract_are_left_out() -> None:
    records = [{**start("j", 10, 1, 1), "from_epoch": None},
               {k: v for k, v in start("o", 10, 2, 1).items() if k != "from_epoch"}]
    procs = processes("h1", records, host_runs("h1", records, [], now=1000))
    assert [(p.job, p.from_epoch) for p in procs] == [("j", None)]


def test_the_report_in_json() -> None:
    report = judge({"h1": [*killed_after_two(), start("j", 15, 2, 2, from_epoch=1)]}, SHARED,
                   {"work": files_of(1, 2)}, reboots={"h1": [12.5]})
    assert report.to_json() == {
        "restarts": 1, "restarts_resumed": 0, "restarts_from_zero": 1,
        "restarts_from_zero_no_checkpoint": 0, "restarts_over_one_epoch_twice": 1,
        "restarts_past_their_checkpoint": 0,
        "epochs_run_twice": 3, "restarts_by_cause": {"reboot": 1},
        "gpu_s_lost_by_cause": {"reboot": 2.5}}
