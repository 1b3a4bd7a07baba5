"""Leftover memory on a host: which processes still holding an ended attempt's GPUs are that
attempt's, ended by `scripts/reap.sh` (the rules are there, beside the code that applies them).
Hosts that can do it (the screen/tmux hosts) satisfy `Reaper`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from eq_tui.hosts.shell_protocol import check_field, hex_text

REAP_GRACE_S = 5.0


@dataclass(frozen=True)
class ReapRequest:
    attempt_dir: str
    job: str
    attempt: int
    project: str
    run_dir: str
    ended: float  # epoch seconds: when the attempt ended (or was killed)
    pids: tuple[int, ...]  # processes holding memory on its GPUs (anyone's)
    grace_s: float = REAP_GRACE_S


@dataclass(frozen=True)
class Reaped:
    pid: int
    user: str
    action: str  # term: ended on TERM; kill: needed KILL; alive: survived KILL
    command: str


@runtime_checkable
class Reaper(Protocol):
    async def reap(self, request: ReapRequest) -> list[Reaped]: ...


def reap_args(request: ReapRequest) -> list[str]:
    return [check_field(request.attempt_dir, "attempt dir"), check_field(request.job, "job"),
            str(request.attempt), check_field(request.project, "project"),
            check_field(request.run_dir, "run dir"), f"{request.ended:.3f}",
            f"{request.grace_s:g}", *(str(pid) for pid in request.pids)]


def parse_reaped(text: str) -> list[Reaped]:
    found = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 5 and parts[0] == "R" and parts[1].isdigit():
            found.append(Reaped(pid=int(parts[1]), user=parts[2], action=parts[3],
                                command=hex_text(parts[4]).strip()))
    return found
