"""`eq-tui status RUN_DIR`: counts by status and the jobs that need a person (from the state);
with --jobs, one line a job: its status, where it runs and why it waits."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eq_tui.api.client import Snapshot
from eq_tui.api.held import held_phase_todo
from eq_tui.api.model import JobState, JobStatus, status_counts
from eq_tui.errors import RunDirError
from eq_tui.present.durations import format_duration
from eq_tui.present.memory_ask import next_ask
from eq_tui.present.queue_eta import counted_down
from eq_tui.results.records import read_records
from eq_tui.results.unseen import Unseen, read_watched, unseen_in_records
from eq_tui.runfiles.statefile import StateFile


def load_jobs(run_dir: Path) -> tuple[dict[str, Any], list[JobState]]:
    if "\0" in str(run_dir):
        raise RunDirError(f"{str(run_dir)!r}: a path cannot contain a NUL byte")
    if not (run_dir / "queue_state.json").exists():
        raise RunDirError(f"{run_dir}: no queue_state.json here (is this an eq-tui run dir?)")
    saved = StateFile(run_dir).load()
    assert saved is not None
    return saved, jobs_from_state(saved, str(run_dir / "queue_state.json"))


async def _live_snapshot(run_dir: Path) -> Snapshot | None:
    from eq_tui.api.control_client import ControlClient, find_socket

    if find_socket(run_dir) is None and not (run_dir / "control.sock").exists():
        return None
    try:
        async with asyncio.timeout(5):
            client = await ControlClient.connect(run_dir)
    except (OSError, ConnectionError, RuntimeError, TimeoutError):
        return None
    snapshot = client.snapshot()
    await client.close()
    return snapshot


def from_snapshot(live: Snapshot) -> tuple[dict[str, Any], list[JobState]]:
    """(saved, jobs) from a running engine's snapshot, in the shape of the state file."""
    saved: dict[str, Any] = {"project": live["project"], "paused": live["paused"],
                             "live_pid": live["settings"].get("pid"),
                             "crash_guard": {"held": dict(live.get("held_phases") or {})},
                             "waiting_reason": live.get("waiting_reason") or "",
                             "finished": bool(live.get("finished")),
                             "eta_s": counted_down(live.get("eta_s"), live.get("eta_at"),
                                                   float(live.get("now") or time.time()))}
    return saved, [JobState.from_json(dict(raw)) for raw in live["jobs"]]


def jobs_from_state(saved: dict[str, Any], where: str) -> list[JobState]:
    try:
        return [JobState.from_json(raw) for raw in saved["jobs"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise RunDirError(f"{where}: a job record is unreadable ({exc!r})") from None


def print_status(run_dir: Path, *, as_json: bool = False, each_job: bool = False) -> int:
    live = None if "\0" in str(run_dir) else asyncio.run(_live_snapshot(run_dir))
    if live is not None:
        saved, jobs = from_snapshot(live)
    else:
        saved, jobs = load_jobs(run_dir)
    return show_status(saved, jobs, as_json=as_json, each_job=each_job, run_dir=str(run_dir),
                       unseen=() if each_job else never_read(run_dir))


def never_read(run_dir: Path) -> list[Unseen]:
    """The goal and early_stop metrics never read from the run's completed jobs (its
    results.jsonl and manifest.json say); [] when either is missing."""
    watched = read_watched(run_dir)
    try:
        records = read_records(run_dir, series=False) if watched else None
    except OSError:
        return []
    return unseen_in_records(watched, records) if records else []


def needs_person_line(job: JobState) -> str:
    """status, failure class and detail without saying the same word twice ("killed killed
    killed by the user")."""
    status = str(job.status)
    cls = job.failure.cls if job.failure else ""
    detail = job.failure.detail if job.failure else (job.reason or "")
    words = [status] if not detail.startswith(status) else []
    if cls and cls != status and not detail.startswith(cls):
        words.append(f"[{cls}]")
    return " ".join([*words, detail]).strip()


def job_where(job: JobState) -> str | None:
    """host:gpus where a job runs (or last ran, once finished); None while it waits."""
    if job.host is None or job.status.is_waiting or job.status.is_held:
        return None
    return f"{job.host}:{','.join(map(str, job.gpus))}" if job.gpus else job.host


def waiting_ask(job: JobState) -> str:
    """What a waiting job's next attempt asks after CUDA OOMs on a shared GPU, as the engine
    published it (present/memory_ask.py); "" for any other job."""
    if not job.status.is_waiting:
        return ""
    return next_ask({"mem_escalation": job.mem_escalation, "next_ask_level": job.next_ask_level,
                     "next_ask_mib": job.next_ask_mib})


def job_reason(job: JobState, queue_reason: str = "", ask: str = "") -> str:
    """Why it waits (its own reason, else the queue's), or what ended it (for a job that
    needs a person); `ask`: what its next attempt asks after CUDA OOMs on a shared GPU."""
    why = job.reason or (queue_reason if job.status.is_waiting else "")
    if not why and not job.status.is_waiting:
        why = job.failure.detail if job.failure and job.status.needs_person else ""
    if ask:
        why = f"{why}; next attempt asks {ask}" if why else f"next attempt asks {ask}"
    return why


def job_row(job: JobState, queue_reason: str = "") -> dict[str, Any]:
    where = job_where(job)
    ask = waiting_ask(job)
    current = job.current
    resumed = current.resumed_from if current is not None and where else None
    reason = job_reason(job, queue_reason, ask)
    if resumed:
        reason = f"{reason}; resumed from {resumed}" if reason else f"resumed from {resumed}"
    preempted = current.preempted_by if current is not None and job.status.is_waiting else None
    if preempted:
        reason = f"preempted by {preempted}; {reason}" if reason else f"preempted by {preempted}"
    return {"id": job.id, "status": str(job.status), "host": job.host if where else None,
            "gpus": list(job.gpus) if where else [], "where": where,
            "reason": reason, "next_ask": ask or None, "resumed_from": resumed,
            "preempted_by": preempted}


def show_jobs(jobs: list[JobState], *, as_json: bool = False, queue_reason: str = "") -> None:
    rows = [job_row(job, queue_reason) for job in jobs]
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    width = min(40, max((len(job.id) for job in jobs), default=0))
    places = min(24, max((len(str(row["where"] or "-")) for row in rows), default=1))
    for row in rows:
        line = f"{row['id']:<{width}}  {row['status']:<10}  {row['where'] or '-':<{places}}"
        sys.stdout.write(f"{line}  {row['reason'] or '-'}\n")


def held_todo(saved: dict[str, Any], jobs: list[JobState], run_dir: str) -> dict[str, str]:
    """phase -> what a person runs for each phase the crash guard holds (the retry names its
    last stuck job, as the crash guard's alert names the last crash)."""
    held = (saved.get("crash_guard") or {}).get("held") or {}
    return {phase: held_phase_todo(run_dir, phase, next(
        (job.id for job in reversed(jobs) if job.phase == phase
         and job.status == JobStatus.STUCK), None)) for phase in held}


def show_status(saved: dict[str, Any], jobs: list[JobState], *, as_json: bool = False,
                where: str = "", each_job: bool = False, run_dir: str = "RUN_DIR",
                unseen: Sequence[Unseen] = ()) -> int:
    """Prints the counts and the jobs that need a person (`each_job`: a line per job instead);
    `where` names the SSH host of a remote run dir, `run_dir` the run dir as commands name it,
    `unseen` the goal and early_stop metrics never read. Exit code: 1 when a job needs a
    person, else 0."""
    counts = status_counts(jobs)
    needing = [job for job in jobs if job.status.needs_person]
    todo = held_todo(saved, jobs, run_dir)
    if each_job:
        show_jobs(jobs, as_json=as_json, queue_reason=str(saved.get("waiting_reason") or ""))
        return 1 if needing else 0
    if as_json:
        print(json.dumps({
            "project": saved.get("project"), "paused": saved.get("paused", False),
            "held_phases": (saved.get("crash_guard") or {}).get("held") or {},
            "held_todo": todo,
            "live": bool(saved.get("live_pid")),
            "eta_s": saved.get("eta_s"),
            "total": len(jobs), "counts": counts,
            "needs_person": [{"id": j.id, "status": str(j.status),
                              "failure": j.failure.to_json() if j.failure else None,
                              "log": j.log} for j in needing],
            "metrics_never_read": [finding.to_json() for finding in unseen]}, indent=1))
        return 1 if needing else 0
    out = sys.stdout
    paused = " (launching paused)" if saved.get("paused") else ""
    source = (f"live from the running engine, pid {saved['live_pid']}" if saved.get("live_pid")
              else "from the state file; no engine is running")
    noun = "job" if len(jobs) == 1 else "jobs"
    out.write(f"{saved.get('project')}: {len(jobs)} {noun}{paused} ({source}{where and ' on '}"
              f"{where})\n")
    for status, count in counts.items():
        out.write(f"  {status:<11} {count}\n")
    if saved.get("live_pid") and not saved.get("finished"):  # the engine's ETA, counted down
        eta = saved.get("eta_s")
        out.write(f"  ETA         {format_duration(eta) if eta is not None else '-'}\n")
    for phase, why in ((saved.get("crash_guard") or {}).get("held") or {}).items():
        out.write(f"\nphase {phase} is held, nothing of it launches: {why}\n"
                  f"  {todo[phase]}\n")
    if unseen:
        out.write("\nmetrics never read:\n")
        for finding in unseen:
            out.write(f"  {finding.text()}\n")
    if needing:
        out.write("\nneeds a person:\n")
        for job in needing:
            out.write(f"  {job.id:<28} {needs_person_line(job)}\n")
            if job.log:
                out.write(f"  {'':<28} log: {job.host}:{job.log}\n")
    return 1 if needing else 0
