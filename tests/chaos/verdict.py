"""The chaos verdict, from what the hosts recorded (pure functions; tests/chaos/test_verdict.py).

Ground truth is each host's `runs.jsonl` (fake-train appends a start/oom record when its
process claims a GPU and an end record with its exit code and when its memory was released),
the output files the jobs wrote and the processes still alive. Whether a fault took effect is
judged from the hosts and the disk too (tests/chaos/traces.py), never from the engine's events.
The engine's state file is what is being checked: it is never taken as evidence that something
ran.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# exec_t is read from /proc to the kernel's clock tick (10 ms) and placed against an uptime
# read to 10 ms: a start is early only by more than both.
CLOCK_TICK_S = 0.02
# A fault's trace may be written this long after the fault ended (a probe round, a reconnect).
TRACE_GRACE_S = 15.0
FAULT_CLASSES = ("lost", "launch_failed", "disk_full")
# Which injected faults can leave a job stuck with which failure class.
EXPLAINS = {
    "lost": ("reboot", "cut_host"),
    "launch_failed": ("cut_host", "reboot", "disk_full"),
    "disk_full": ("disk_full",),
    "exit_nonzero": ("disk_full",),  # only with its log refused (chaos.log_refused)
}


@dataclass(frozen=True)
class Run:
    """One process of ours on one GPU, as its host recorded it. An OOM at start is a run that
    ended where it started; one during its ramp or a training step (`fake-train --ramp`,
    `--oom-after`) marks the run it ended.
    A start with no end record ended at the reboot that killed it, or (nothing explains its
    end) holds its GPU until the check."""

    host: str
    job: str
    attempt: int
    pid: int
    gpu: int
    start: float  # when the process was exec'd (falls back to when it claimed the GPU)
    claimed: float
    end: float
    released: float
    exit: int | None
    oom: bool = False
    ended_by: str = "record"  # record | reboot | check
    mib: int = 0  # the most it may hold on the GPU (fake-train's --mem)


@dataclass(frozen=True)
class EngineKill:
    """What the OS and the run dir showed around a kill -9 of the engine."""

    status: int | None  # how the OS reaped the killed engine (-9: by SIGKILL)
    lock_at_kill: str  # engine.lock as the killed engine left it (it names its holder's pid)
    successor: int | None  # the engine started after it
    lock_after: str  # engine.lock once the successor had started (or when waiting gave up)


@dataclass(frozen=True)
class StateRecovery:
    """What the run dir held around a corrupted state file (corrupt_state)."""

    parses_after: bool  # the truncated state file parsed once the refused engine had exited
    good_generation: int | None  # the previous good copy put back: its generation ...
    good_completed: frozenset[str]  # ... and the jobs it called completed
    recovered_generation: int | None  # the state file the next engine wrote over the copy
    recovered_completed: frozenset[str]


@dataclass(frozen=True)
class Fault:
    kind: str  # kill9 | cut_host | reboot | corrupt_state | disk_full | second_engine
    host: str | None
    t0: float
    t1: float
    pid: int | None = None  # the engine killed (kill9)
    kill: EngineKill | None = None  # kill9: what the OS and engine.lock showed
    recovery: StateRecovery | None = None  # corrupt_state: what the state files held
    sessions_killed: tuple[str, ...] = ()  # reboot: attempt dirs whose wrapper it killed
    engine: str = ""  # second_engine: its project (its jobs' ids start with it)


@dataclass
class Verdict:
    jobs: int = 0
    packed_jobs: int = 0
    multi_gpu_jobs: int = 0
    hung_jobs: int = 0
    hung_restarted: int = 0
    reruns_explained: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    faults_effective: Counter[str] = field(default_factory=Counter)
    launches: int = 0
    duplicate_launches: int = 0
    overlaps_released: int = 0
    overlaps_exit: int = 0
    lost: int = 0
    completed_unverified: int = 0
    stuck_unverified: int = 0
    wrong_status: int = 0
    left_running: int = 0
    retried_by_hand: int = 0
    retried_unexplained: int = 0
    # another user's engine started mid-run on the same hosts (second_engine): its runs, and
    # the times a GPU was given to both engines' jobs at once (by the hosts' records)
    second_engine_runs: int = 0
    double_bookings: int = 0
    min_release_margin_s: float | None = None
    # checkpoint contracts (tests/chaos/resumes.py): the restarts' figures; those from scratch
    # with a checkpoint there, past it or with more than one epoch run twice; restarted jobs
    # whose final loss was compared with a run that never stopped, and those that differ
    resumes: dict[str, Any] = field(default_factory=dict)
    restarts_wrong: int = 0
    final_metric_checked: int = 0
    final_metric_mismatches: int = 0
    wall_s: float = 0.0
    details: list[str] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)  # what each effective fault left
    # the evidence a run must have for its zeros to mean anything: this many faults that took
    # effect, of this many kinds, none injected while no job of ours ran
    min_effective: int = 0
    min_kinds: int = 0
    idle_faults: int = 0
    seed: int | None = None  # the run's (its jobs' mix and fault schedule): --seed replays it

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed, "jobs": self.jobs, "packed_jobs": self.packed_jobs,
            "multi_gpu_jobs": self.multi_gpu_jobs, "hung_jobs": self.hung_jobs,
            "hung_restarted": self.hung_restarted,
            "faults": sum(self.faults.values()),
            "faults_by_kind": dict(sorted(self.faults.items())),
            "faults_effective": sum(self.faults_effective.values()),
            "faults_effective_by_kind": dict(sorted(self.faults_effective.items())),
            "launches": self.launches, "duplicate_launches": self.duplicate_launches,
            "reruns_explained": self.reruns_explained,
            "overlaps_released": self.overlaps_released, "overlaps_exit": self.overlaps_exit,
            "lost": self.lost, "completed_unverified": self.completed_unverified,
            "stuck_unverified": self.stuck_unverified, "wrong_status": self.wrong_status,
            "left_running": self.left_running, "retried_by_hand": self.retried_by_hand,
            "retried_unexplained": self.retried_unexplained,
            "second_engine_runs": self.second_engine_runs,
            "double_bookings": self.double_bookings,
            "min_release_margin_s": self.min_release_margin_s,
            **self.resumes, "restarts_wrong": self.restarts_wrong,
            "final_metric_checked": self.final_metric_checked,
            "final_metric_mismatches": self.final_metric_mismatches,
            "idle_faults": self.idle_faults,
            "evidence_needed": {"faults_effective": self.min_effective,
                                "kinds": self.min_kinds},
            "enough_evidence": self.enough_evidence,
            "ok": self.ok,
            "wall_s": round(self.wall_s, 1), "details": self.details,
            "fault_traces": self.traces,
        }

    @property
    def enough_evidence(self) -> bool:
        """Whether the faults can have proved anything: enough of them took effect, of enough
        kinds, and each met running jobs."""
        return (sum(self.faults_effective.values()) >= self.min_effective
                and len(+self.faults_effective) >= self.min_kinds and not self.idle_faults)

    @property
    def ok(self) -> bool:
        return self.enough_evidence and not (
            self.duplicate_launches or self.overlaps_released or self.lost
            or self.completed_unverified or self.stuck_unverified or self.wrong_status
            or self.left_running or self.retried_unexplained or self.double_bookings
            or self.restarts_wrong or self.final_metric_mismatches)


def host_runs(host: str, records: Iterable[Mapping[str, Any]], reboots: Iterable[float],
              now: float) -> list[Run]:
    """The runs on one host from its runs.jsonl records, starts paired with ends by
    (pid, job, attempt) so that a reused pid cannot pair two processes."""
    reboot_times = sorted(reboots)
    runs: list[Run] = []
    open_starts: dict[tuple[int, str, int], Mapping[str, Any]] = {}
    ran_out: set[tuple[int, str, int]] = set()

    def key(rec: Mapping[str, Any]) -> tuple[int, str, int]:
        return int(rec["pid"]), str(rec["job"]), int(rec["attempt"])

    def make(rec: Mapping[str, Any], end: float, released: float, code: int | None,
             oom: bool = False, ended_by: str = "record") -> list[Run]:
        """One run per GPU the process held (a multi-GPU job holds every one of them)."""
        claimed = float(rec["t"])
        exec_t = rec.get("exec_t")
        start = min(claimed, float(exec_t)) if exec_t is not None else claimed
        gpus = [int(g) for g in rec.get("gpus") or [rec["gpu"]]]
        mib = int(rec.get("peak_mib") or rec.get("mib") or 0)
        return [Run(host, str(rec["job"]), int(rec["attempt"]), int(rec["pid"]), gpu, start,
                    claimed, end, released, code, oom, ended_by, mib) for gpu in gpus]

    for rec in records:
        kind = rec.get("event")
        if kind == "start":
            open_starts[key(rec)] = rec
        elif kind == "oom" and rec.get("during") in ("ramp", "step"):
            ran_out.add(key(rec))
        elif kind == "oom":
            t = float(rec["t"])
            runs += make(rec, t, t, 1, oom=True)
        elif kind == "end" and key(rec) in open_starts:
            start = open_starts.pop(key(rec))
            end = float(rec["t"])
            linger = rec.get("linger_until")
            released = max(end, float(linger)) if linger is not None else end
            runs += make(start, end, released, rec.get("exit"), oom=key(rec) in ran_out)
    for rec in open_starts.values():
        t = float(rec["t"])
        reboot = next((r for r in reboot_times if r >= t), None)
        if reboot is not None:
            runs += make(rec, reboot, reboot, None, ended_by="reboot")
        else:
            runs += make(rec, now, now, None, ended_by="check")
    return runs


def gpu_overlaps(runs: Iterable[Run], *, released: bool, packed: frozenset[str] = frozenset(),
                 capacity_mib: Mapping[str, int] | None = None) -> tuple[list[str], float | None]:
    """Runs that began on a GPU of their host before what held it let go: with `released`,
    before its memory was released (the product's promise), else before it exited. A job in
    `packed` (it declared its memory) may share a GPU with other packed jobs, and with the
    lingering memory of jobs that ended, as long as their most memory together fits the GPU
    (`capacity_mib` per host); any other start on a GPU that something still holds is an
    overlap. Also the smallest margin by which a start followed the
    release of a GPU it did not share."""
    by_gpu: dict[tuple[str, int], list[Run]] = defaultdict(list)
    for run in runs:
        by_gpu[(run.host, run.gpu)].append(run)
    found: list[str] = []
    margin: float | None = None
    def until(run: Run) -> float:
        return run.released if released else run.end

    for (host, gpu), on_gpu in sorted(by_gpu.items()):
        on_gpu.sort(key=lambda r: (r.start, r.claimed))
        holding: list[Run] = []
        last_free = float("-inf")
        for run in on_gpu:
            still = [r for r in holding if until(r) > run.start + CLOCK_TICK_S]
            last_free = max([last_free, *(until(r) for r in holding if r not in still)])
            holding = still
            # a packed job may start beside packed jobs, and beside the memory an ended job
            # still holds (it counts against the GPU), never beside a running unpacked job
            shared = run.job in packed and all(r.job in packed or r.end <= run.start
                                               for r in holding)
            total = run.mib + sum(r.mib for r in holding)
            capacity = (capacity_mib or {}).get(host, 0)
            if not shared:
                previous = max([last_free, *(until(r) for r in holding)])
                if previous > float("-inf"):
                    gap = run.start - previous
                    margin = gap if margin is None else min(margin, gap)
            if holding and not (shared and total <= capacity):
                first = max(holding, key=until)
                why = (f"{total} MiB of packed jobs on a {capacity} MiB GPU" if shared else
                       f"{until(first) - run.start:.3f} s before {first.job}/a{first.attempt} "
                       "let go")
                found.append(f"{host} GPU {gpu}: {run.job}/a{run.attempt} started at "
                             f"{run.start:.3f}, {why}")
            holding.append(run)
    return found, margin


def double_bookings(runs: Iterable[Run], engine_of: Callable[[str], str],
                    packed: frozenset[str] = frozenset()) -> list[str]:
    """Runs of two engines (`engine_of` a job id) on one GPU at once, until the memory of the
    one that started first was released: its GPU given to both. A packed job that starts
    beside another engine's ended job's lingering memory is no double booking (that memory
    counts against the GPU like anyone's: gpu_overlaps judges it)."""
    by_gpu: dict[tuple[str, int], list[Run]] = defaultdict(list)
    for run in runs:
        by_gpu[(run.host, run.gpu)].append(run)
    found = []
    for (host, gpu), on_gpu in sorted(by_gpu.items()):
        on_gpu.sort(key=lambda r: r.start)
        for a, b in itertools.combinations(on_gpu, 2):
            if engine_of(a.job) == engine_of(b.job):
                continue
            if b.job in packed and b.start >= a.end - CLOCK_TICK_S:
                continue
            if b.start < a.released - CLOCK_TICK_S and a.start < b.released - CLOCK_TICK_S:
                found.append(f"{host} GPU {gpu}: {a.job}/a{a.attempt} ({engine_of(a.job)}) and "
                             f"{b.job}/a{b.attempt} ({engine_of(b.job)}) at once")
    return found


def rerun_explained(success: Run, effective: Iterable[Fault],
                    exit_recorded: Callable[[Run], bool] = lambda _run: True) -> str | None:
    """Why a job could rightly run again after a run of it exited 0: its attempt's exit record
    is not on its host (`exit_recorded`, read from the host's log disk), so the engine rightly
    saw the attempt lost, and an effective fault on that host as it ended explains the loss:
    a full disk refused the record, or a reboot killed the attempt's wrapper between the job's
    exit and the record. Nothing else excuses it (a cut link leaves the record on the disk)."""
    for fault in effective:
        if fault.host != success.host or fault.kind not in ("disk_full", "reboot"):
            continue
        if fault.t0 - TRACE_GRACE_S <= success.end <= fault.t1 + TRACE_GRACE_S \
                and not exit_recorded(success):
            return f"{fault.kind} on {fault.host} at {fault.t0:.1f} (no exit record of " \
                f"{success.job}/a{success.attempt} on the host)"
    return None


def duplicates(runs: Iterable[Run],
               rerun_excuse: Callable[[Run], str | None] = lambda _run: None) -> list[str]:
    """An attempt that started more than once, runs of one job alive at once, and a job run
    again after a run of it succeeded (unless `rerun_excuse` names a fault that explains it:
    then the line says so and is no duplicate)."""
    found: list[str] = []
    by_job: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_job[run.job].append(run)
    for job, of_job in sorted(by_job.items()):
        processes = {(r.host, r.pid, r.attempt): r for r in of_job}.values()  # one per process
        for attempt, n in sorted(Counter(r.attempt for r in processes).items()):
            if n > 1:
                found.append(f"{job}/a{attempt} started {n} times")
        ordered = sorted(processes, key=lambda r: r.start)
        for a, b in itertools.combinations(ordered, 2):
            if a.attempt != b.attempt and b.start < a.end and a.start < b.end:
                found.append(f"{job}: a{a.attempt} on {a.host} and a{b.attempt} on {b.host} "
                             "ran at once")
        succeeded = [r for r in ordered if r.exit == 0]
        first_ok = succeeded[0] if succeeded else None
        if first_ok and any(r.start > first_ok.end and r.attempt != first_ok.attempt
                            for r in ordered):
            excuse = rerun_excuse(first_ok)
            found.append(f"{job}: ran again after a{first_ok.attempt} succeeded"
                         + (f", explained by {excuse}" if excuse else ""))
    return found


def read_output(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def completed_proof(job: str, runs: list[Run], output: dict[str, Any] | None,
                    needs_output: bool) -> str | None:
    """Why the hosts do not show `job` as completed (None: they do): an exit-0 run, and the
    output that run wrote."""
    ok = [r for r in runs if r.exit == 0]
    if not ok:
        return f"{job}: no run exited 0 on any host"
    if needs_output:
        if output is None:
            return f"{job}: exited 0 but wrote no output"
        if int(output.get("attempt", -1)) not in {r.attempt for r in ok}:
            return f"{job}: output from attempt {output.get('attempt')}, no exit-0 run of it"
    return None


def stuck_proof(job: str, runs: list[Run], failure_class: str | None) -> str | None:
    """Why the hosts do not back a stuck job's failure class (None: they do)."""
    if failure_class == "cuda_oom" and not any(r.oom for r in runs):
        return f"{job}: stuck with cuda_oom, no OOM on any host"
    if failure_class == "exit_nonzero" and not any(r.exit not in (0, None) for r in runs):
        return f"{job}: stuck with exit_nonzero, no failed run on any host"
    if failure_class is not None and failure_class not in FAULT_CLASSES and \
            any(r.exit == 0 for r in runs):
        return f"{job}: stuck with {failure_class} but a run of it exited 0"
    return None


def explain_retries(victims: Mapping[str, tuple[str, str | None, float]],
                    effective: list[Fault], per_fault: int) -> list[str]:
    """Jobs stuck by a fault (job -> (failure class, host, when stuck)) that no effective
    fault on that host explains, or beyond `per_fault` (the GPUs a host has) per fault."""
    used: Counter[int] = Counter()
    unexplained: list[str] = []
    for job, (cls, host, when) in sorted(victims.items(), key=lambda kv: kv[1][2]):
        candidates = [i for i, f in enumerate(effective)
                      if f.kind in EXPLAINS.get(cls, ()) and f.host == host
                      and f.t0 <= when <= f.t1 + TRACE_GRACE_S * 4 and used[i] < per_fault]
        if candidates:
            used[candidates[0]] += 1
        else:
            unexplained.append(f"{job}: stuck with {cls} on {host} at {when:.1f}, no fault "
                               "there explains it")
    return unexplained


def read_events(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a SIGKILL mid-write
    return events
