"""Events → notes: what happened, in words a person can act on without opening the UI.

A note's id is derived from what it is about (`stuck:JOB:ATTEMPT`, `phase_done:PHASE`,
`finished`...), so the same fact seen twice — in the event stream and again in the snapshot
after a restart — is one note.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eq_tui.api.events import (
    Event,
    GpuQuarantined,
    HostStateChanged,
    JobStalled,
    JobStateChanged,
    PhaseHeld,
    QueueFinished,
)
from eq_tui.api.model import FINISHED, JobStatus

FINISHED_NAMES = frozenset(str(status) for status in FINISHED)


@dataclass(frozen=True)
class Note:
    id: str
    kind: str  # stuck | stalled | quarantined | host_down | phase_done | finished
    subject: str  # the job, host:GPU, host or phase it is about (digests list these)
    text: str
    event: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "subject": self.subject, "text": self.text,
                "event": self.event}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Note:
        return cls(id=str(data["id"]), kind=str(data["kind"]), subject=str(data["subject"]),
                   text=str(data["text"]), event=dict(data.get("event") or {}))


def where(host: str | None, gpus: Iterable[int]) -> str:
    listed = ",".join(str(g) for g in gpus)
    return f"{host}:{listed}" if host and listed else (host or "?")


def stuck_note(project: str, event: JobStateChanged, job: Mapping[str, Any],
               tail: list[str]) -> Note:
    history = job.get("history") or [{}]
    code = history[-1].get("exit_code")
    text = (f"[{project}] stuck: {event.job} (attempt {event.attempt}, "
            f"{where(event.host, event.gpus)}) {event.failure_class or 'failed'}"
            + (f", exit {code}" if code is not None else "")
            + (f": {event.detail}" if event.detail else ""))
    if tail:
        text += "\nlast lines:\n" + "\n".join(line[:200] for line in tail[-5:])
    return Note(f"stuck:{event.job}:{event.attempt}", "stuck", event.job, text,
                {**event.to_json(), "exit_code": code, "last_lines": tail[-5:]})


def stalled_note(project: str, event: JobStalled) -> Note:
    action = "" if event.action == "alert" else f"; {event.action}"
    return Note(f"stalled:{event.job}:{event.attempt}:{event.action}", "stalled", event.job,
                f"[{project}] {event.detail}: {event.job} (attempt {event.attempt}, "
                f"{where(event.host, event.gpus)}){action}", event.to_json())


def quarantined_note(project: str, event: GpuQuarantined) -> Note:
    return Note(f"quarantined:{event.host}:{event.gpu}:{event.reason}", "quarantined",
                f"{event.host}:{event.gpu}",
                f"[{project}] {event.host} GPU {event.gpu} quarantined: {event.reason}",
                event.to_json())


def phase_held_note(project: str, event: PhaseHeld) -> Note:
    """The crash guard held a phase: a person is needed, as for a stuck job (targets that want
    `stuck` get it)."""
    jobs = ", ".join(event.jobs)
    return Note(f"phase_held:{event.phase}:{int(event.at)}", "stuck", f"phase {event.phase}",
                f"[{project}] phase {event.phase} held: {jobs} failed alike "
                f"({event.failure_class}) soon after they started"
                + (f": {event.line}" if event.line else "")
                + f"; {event.todo or 'retry one of them or resume once the command is fixed'}",
                event.to_json())


def host_down_note(project: str, event: HostStateChanged) -> Note:
    return Note(f"host_down:{event.host}:{int(event.at)}", "host_down", event.host,
                f"[{project}] host {event.host} is down: {event.reason}", event.to_json())


def finished_note(project: str, counts: Mapping[str, int], exit_code: int | None,
                  event: dict[str, Any]) -> Note:
    listed = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    return Note("finished", "finished", project,
                f"[{project}] queue finished (exit {exit_code}): {listed}", event)


def phase_note(project: str, phase: str, jobs: Iterable[Mapping[str, Any]]) -> Note:
    """A phase whose every job has finished (completed or needing a person)."""
    counts: dict[str, int] = {}
    for job in jobs:
        if str(job.get("phase")) == phase:
            counts[str(job.get("status"))] = counts.get(str(job.get("status")), 0) + 1
    listed = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    return Note(f"phase_done:{phase}", "phase_done", phase,
                f"[{project}] phase {phase} done: {listed}",
                {"type": "phase_done", "project": project, "phase": phase, "counts": counts})


def snapshot_notes(project: str, snapshot: Mapping[str, Any]) -> list[Note]:
    """The facts a snapshot shows that a note may have been missed for (the engine was killed
    between an event and its note): stuck and stalled jobs, quarantined GPUs, the end."""
    notes = []
    for job in snapshot.get("jobs") or []:
        if job.get("status") == JobStatus.STUCK:
            event = JobStateChanged(project=project, at=float(snapshot.get("now") or 0.0),
                                    job=str(job["id"]), old="running", new="stuck",
                                    host=job.get("host"), gpus=tuple(job.get("gpus") or ()),
                                    attempt=int(job.get("attempts") or 0),
                                    failure_class=(job.get("failure") or {}).get("class"),
                                    detail=(job.get("failure") or {}).get("detail", ""))
            notes.append(stuck_note(project, event, job, []))
    for host in snapshot.get("hosts") or []:
        for gpu in host.get("gpus") or []:
            if gpu.get("quarantined"):
                notes.append(quarantined_note(project, GpuQuarantined(
                    project=project, at=0.0, host=str(host["name"]), gpu=int(gpu["index"]),
                    reason=str(gpu.get("quarantine_reason") or ""))))
    if snapshot.get("finished"):
        counts: dict[str, int] = {}
        for job in snapshot.get("jobs") or []:
            counts[str(job.get("status"))] = counts.get(str(job.get("status")), 0) + 1
        notes.append(finished_note(project, counts, snapshot.get("exit_code"),
                                   {"type": "queue_finished", "project": project,
                                    "counts": counts, "exit_code": snapshot.get("exit_code")}))
    return notes


def event_note(project: str, event: Event) -> Note | None:
    """The note an event makes by itself (stuck notes need the job's record: the notifier)."""
    if isinstance(event, JobStalled) and event.action != "recovered":
        return stalled_note(project, event)
    if isinstance(event, GpuQuarantined) and not event.released:
        return quarantined_note(project, event)
    if isinstance(event, HostStateChanged) and event.state == "down":
        return host_down_note(project, event)
    if isinstance(event, PhaseHeld):
        return phase_held_note(project, event)
    if isinstance(event, QueueFinished):
        return finished_note(project, event.counts, event.exit_code, event.to_json())
    return None


def leading(notes: list[Note]) -> list[Note]:
    """A burst's notes in the order a message tells them: a held phase first (it stops a whole
    phase and says what to run), in full; then as they came."""
    return sorted(notes, key=lambda note: not note.id.startswith("phase_held:"))


def digest(notes: list[Note], project: str) -> str:
    """One message for a burst: the first note in full, then the rest counted by kind."""
    if len(notes) == 1:
        return notes[0].text
    lines = [notes[0].text]
    by_kind: dict[str, list[str]] = {}
    for note in notes[1:]:
        by_kind.setdefault(note.kind, []).append(note.subject)
    for kind, subjects in by_kind.items():
        shown = ", ".join(subjects[:10]) + (f" and {len(subjects) - 10} more"
                                            if len(subjects) > 10 else "")
        lines.append(f"{len(subjects)} more {_plural(kind, len(subjects))}: {shown}")
    return f"[{project}] {len(notes)} notifications\n" + "\n".join(lines)


_WORDS = {"stuck": ("job stuck", "jobs stuck"), "stalled": ("job stalled", "jobs stalled"),
          "quarantined": ("GPU quarantined", "GPUs quarantined"),
          "host_down": ("host down", "hosts down"), "phase_done": ("phase done", "phases done"),
          "finished": ("queue finished", "queues finished")}


def _plural(kind: str, n: int) -> str:
    one, many = _WORDS.get(kind, (kind, kind))
    return one if n == 1 else many
