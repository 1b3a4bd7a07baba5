"""Did every restart resume from the newest checkpoint? (issue 44; pure functions, unit-tested
in tests/chaos/test_resumes.py.)

Ground truth is the hosts' own records: fake-train's start/oom/end records carry the epoch a
checkpointed run began with (`from_epoch`, 1: from scratch) and the file it resumed from; an
`epoch` record each finished epoch, a `checkpoint` record once its file was saved, a `hang`
record when it hung; and the checkpoint files on each host's disk with their mtimes. Hosts that
share a disk see each other's files (the chaos bed's two loopback hosts share one working
dir); a restart on a host whose disk holds no checkpoint of the job rightly starts from
scratch.

A restart is any run of a job after its first. Per restart:
- from zero: it began at epoch 1 although a checkpoint of the job was on its host's disk when
  it started (saved by an earlier run before that, or a file there older than the start);
- skipped: it began past the epoch after the newest checkpoint of its own on its disk (it
  resumed from a file that was not there, or another job's);
- epochs run twice: the epochs a checkpoint on its disk already held that it ran again (it
  resumed from an older one than the newest), plus the epoch the run before it was in when it
  stopped (none when that run OOMed at start, hung, succeeded, or had no epoch left: it failed
  after its last); more than one is flagged;
- GPU time lost: the run before it, from the moment its work stopped being kept (when it saved
  the checkpoint this restart resumed from; its start when it saved none of it) to its end,
  times its GPUs; charged to why that run ended: `reboot` (no end record after a reboot of its
  host, or killed by a signal while its host rebooted: the sessions the reboot ended), `oom`,
  `stall` (it hung and was stopped), else `other`.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.chaos.verdict import CLOCK_TICK_S, Run

# a session the reboot killed may record its end this long after the reboot returned
REBOOT_GRACE_S = 2.0

Key = tuple[str, int, str, int]  # host, pid, job, attempt


@dataclass(frozen=True)
class Process:
    """One run of a checkpointed job, as its host recorded it."""

    host: str
    job: str
    attempt: int
    pid: int
    start: float
    end: float
    gpus: int
    from_epoch: int | None  # None: the file it resumed from was no checkpoint
    resume: str | None
    saved: Mapping[int, float]  # epoch -> when its checkpoint was on the disk
    epochs: frozenset[int]  # the epochs it finished
    total: int | None = None  # the epochs the whole run has
    oom_at_start: bool = False
    oom: bool = False
    hung: bool = False
    exit: int | None = None
    ended_by: str = "record"

    @property
    def in_an_epoch(self) -> bool:
        """It stopped with an epoch under way: it trained, and had epochs left."""
        if self.oom_at_start or self.hung or self.exit == 0:
            return False
        last = max(self.epochs, default=(self.from_epoch or 1) - 1)
        return self.total is None or last < self.total

    def cause(self, reboots: Iterable[tuple[float, float]] = ()) -> str:
        """Why it ended, as far as the hosts tell (`reboots`: its host's, from when to when)."""
        signalled = self.exit is None or self.exit >= 128
        if self.ended_by == "reboot" or (signalled and any(
                t0 - CLOCK_TICK_S <= self.end <= t1 + REBOOT_GRACE_S for t0, t1 in reboots)):
            return "reboot"
        if self.oom:
            return "oom"
        return "stall" if self.hung else "other"


@dataclass
class ResumeReport:
    restarts: int = 0
    resumed: int = 0  # began from a checkpoint
    from_zero_none_there: int = 0  # began from scratch: no checkpoint on its host's disk
    from_zero: list[str] = field(default_factory=list)  # ... although there was one
    twice_over: list[str] = field(default_factory=list)  # more than one epoch run twice
    skipped: list[str] = field(default_factory=list)  # began past its newest checkpoint
    epochs_twice: int = 0
    lost_s: defaultdict[str, float] = field(
        default_factory=lambda: defaultdict(float))  # GPU seconds, by cause
    restarts_by_cause: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        return {"restarts": self.restarts, "restarts_resumed": self.resumed,
                "restarts_from_zero": len(self.from_zero),
                "restarts_from_zero_no_checkpoint": self.from_zero_none_there,
                "restarts_over_one_epoch_twice": len(self.twice_over),
                "restarts_past_their_checkpoint": len(self.skipped),
                "epochs_run_twice": self.epochs_twice,
                "restarts_by_cause": dict(sorted(self.restarts_by_cause.items())),
                "gpu_s_lost_by_cause": {k: round(v, 1) for k, v in sorted(self.lost_s.items())}}


def processes(host: str, records: Iterable[Mapping[str, Any]],
              runs: Iterable[Run]) -> list[Process]:
    """The checkpointed runs on one host: `runs` (verdict.host_runs of the same records) give
    each its start, end and how it ended; the records what it began from and what it saved."""
    records = list(records)
    began: dict[Key, Mapping[str, Any]] = {}
    saved: dict[Key, dict[int, float]] = defaultdict(dict)
    epochs: dict[Key, set[int]] = defaultdict(set)
    hung: set[Key] = set()
    step_oom: set[Key] = set()
    for rec in records:
        if "pid" not in rec or "job" not in rec:
            continue
        key = (host, int(rec["pid"]), str(rec["job"]), int(rec.get("attempt", 0)))
        kind = rec.get("event")
        if kind in ("start", "oom") and "from_epoch" in rec:
            began.setdefault(key, rec)
        if kind == "oom" and rec.get("during") in ("ramp", "step"):
            step_oom.add(key)
        elif kind == "checkpoint":
            saved[key][int(rec["epoch"])] = float(rec["t"])
        elif kind == "epoch":
            epochs[key].add(int(rec["epoch"]))
        elif kind == "hang":
            hung.add(key)
    gpus: Counter[Key] = Counter()
    first_run: dict[Key, Run] = {}
    for run in runs:
        key = (run.host, run.pid, run.job, run.attempt)
        gpus[key] += 1
        first_run.setdefault(key, run)
    found = []
    for key, run in first_run.items():
        if key not in began:
            continue  # no checkpoint contract: nothing to resume
        rec = began[key]
        from_epoch = rec.get("from_epoch")
        found.append(Process(
            host, run.job, run.attempt, run.pid, run.start, run.end, gpus[key],
            None if from_epoch is None else int(from_epoch), rec.get("resume"),
            dict(saved[key]), frozenset(epochs[key]),
            None if rec.get("epochs") is None else int(rec["epochs"]),
            oom_at_start=run.oom and key not in step_oom, oom=run.oom, hung=key in hung,
            exit=run.exit, ended_by=run.ended_by))
    return found


def checkpoints_at(job: str, t: float, host: str, procs: Iterable[Process],
                   disk_of: Mapping[str, str],
                   files: Mapping[str, Mapping[tuple[str, int], float]]) -> set[int]:
    """The epochs of `job` whose checkpoint was on `host`'s disk at `t`: the file is there
    (files: disk -> (job, epoch) -> mtime) and was saved before `t`, by a run on a host of the
    same disk (its record), or is older than `t` (saved by a run killed before its record)."""
    disk = disk_of[host]
    on_disk = files.get(disk, {})
    there = {epoch for (of, epoch), mtime in on_disk.items() if of == job and mtime < t}
    for proc in procs:
        if proc.job == job and disk_of[proc.host] == disk:
            there |= {epoch for epoch, when in proc.saved.items()
                      if when < t and (job, epoch) in on_disk}
    return there


def check_resumes(procs: Iterable[Process], disk_of: Mapping[str, str],
                  files: Mapping[str, Mapping[tuple[str, int], float]],
                  reboots: Mapping[str, list[tuple[float, float]]] | None = None
                  ) -> ResumeReport:
    """Every restart of every checkpointed job, judged (see the module's doc); `reboots`:
    host -> when each of its reboots began and ended."""
    report = ResumeReport()
    by_job: dict[str, list[Process]] = defaultdict(list)
    everyone = list(procs)
    for proc in everyone:
        by_job[proc.job].append(proc)
    for job, runs in sorted(by_job.items()):
        runs.sort(key=lambda p: p.start)
        for before, restart in itertools.pairwise(runs):
            report.restarts += 1
            cause = before.cause((reboots or {}).get(before.host, []))
            report.restarts_by_cause[cause] += 1
            there = checkpoints_at(job, restart.start, restart.host, everyone, disk_of, files)
            newest = max(there, default=0)
            name = f"{job}/a{restart.attempt} on {restart.host}"
            if restart.from_epoch == 1:
                if newest:
                    report.from_zero.append(f"{name}: began from epoch 1 with epoch-{newest}'s "
                                            "checkpoint on its disk")
                else:
                    report.from_zero_none_there += 1
            else:
                report.resumed += 1
            begins = restart.from_epoch if restart.from_epoch is not None else newest + 1
            if begins > newest + 1:
                report.skipped.append(f"{name}: began at epoch {begins} from {restart.resume} "
                                      f"with epoch-{newest}'s checkpoint its newest there")
            redone = max(0, newest - (begins - 1))
            twice = redone + before.in_an_epoch
            report.epochs_twice += twice
            if twice > 1:
                report.twice_over.append(f"{name}: {twice} epochs run twice (began at epoch "
                                         f"{begins}, epoch-{newest}'s checkpoint there)")
            kept = before.saved.get(begins - 1, before.start)
            report.lost_s[cause] += max(0.0, before.end - kept) * before.gpus
    return report
