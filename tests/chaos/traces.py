"""Whether a chaos fault took effect, judged from what the hosts and the OS recorded (pure;
tests/chaos/test_verdict.py). The engine's own events are never read: an engine that failed to
notice a fault must not make it look ineffective, nor one that imagined a fault make it count.

What counts, kind by kind (a fault with no such record does not count as effective):

- kill9: the OS reaped the engine with SIGKILL status (it was alive until the kill, with no
  chance to clean up), engine.lock still named that pid (it was the queue's engine, holding the
  run dir, not one still starting), and the next engine took the lock (engine.lock names it):
  the queue lost its engine mid-run and another took the run dir over.
- cut_host: the host's sshd log shows a connection it accepted and never logged closed in the
  life of the listener that the cut ended (a restart within the fault's window): a live
  connection dropped. A connection closed cleanly logs `Disconnected`, `Connection closed`,
  `Connection reset`, `Read error` or a `Timeout`; one whose sshd was killed logs nothing more.
- disk_full: a record the host's launcher or attempt wrapper always writes with content (the
  command, the claims, the wrapper, pid/pgid, the start/end stamps, the exit code) left empty
  on that host's log disk within the window: the file was created and its bytes refused, which
  is what ENOSPC does (no `No space left on device` message can be kept on the full disk).
- reboot: runs of a job on that host killed by it (a start record with no end record before
  the reboot, from runs.jsonl), or else sessions of ours gone: attempt wrappers the OS had
  alive that the reboot's SIGKILL reached (a job between its launch and its GPU claim).
- corrupt_state: the state file's bytes failed to parse after the engine that refused them had
  exited (corrupted on disk, and not overwritten), and the next engine wrote a state of a later
  generation than the previous good copy put back, still calling every job that copy called
  completed (it recovered from the copy rather than starting over).
- second_engine: runs of its jobs in the hosts' records, started after it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tests.chaos.verdict import CLOCK_TICK_S, Fault, Run
from tests.support.sshbed import SSHD_STARTED

SIGKILL_STATUS = -9  # Popen.returncode of a process the kernel ended with SIGKILL
# The records launch.sh and the attempt wrapper write, each never empty once written whole.
WRITTEN_WHOLE = ("claims", "cmd", "run.sh", "pgid", "pid", "start", "end", "exit", "exit.tmp")
_ACCEPTED = re.compile(r"^Accepted \S+ for (\S+) from \S+ port (\d+)")
_CLOSED = re.compile(r"^(?:Disconnected from|Connection closed by|Connection reset by"
                     r"|Read error from remote host|Received disconnect from|Timeout,"
                     r"|Closing connection to).*?\b(?:\d+\.){3}\d+ port (\d+)")


@dataclass(frozen=True)
class DroppedConnection:
    """A connection sshd accepted and never logged closed before its listener was restarted."""

    user: str
    port: int
    up_since: float  # when the listener that accepted it started
    restarted: float  # when the next listener started (the drop came before)


@dataclass(frozen=True)
class RefusedWrite:
    """A record the host's scripts write with content, found empty on the host's disk."""

    path: str
    t: float  # its mtime: when it was created


@dataclass(frozen=True)
class HostRecords:
    runs: Sequence[Run] = ()
    sshd_logs: Mapping[str, Sequence[str]] = field(default_factory=dict)  # host -> lines
    refused_writes: Mapping[str, Sequence[RefusedWrite]] = field(default_factory=dict)


def dropped_connections(lines: Iterable[str]) -> list[DroppedConnection]:
    """The connections of a host's sshd log that a restart found still open. Lines before the
    first start stamp, and the connections of the last listener (alive at the check), are not
    placed: nothing ended them yet."""
    dropped: list[DroppedConnection] = []
    up_since: float | None = None
    live: dict[int, str] = {}
    for line in lines:
        if line.startswith(SSHD_STARTED):
            started = float(line[len(SSHD_STARTED):])
            if up_since is not None:
                dropped += [DroppedConnection(user, port, up_since, started)
                            for port, user in sorted(live.items())]
            up_since, live = started, {}
        elif accepted := _ACCEPTED.match(line):
            live[int(accepted[2])] = accepted[1]
        elif closed := _CLOSED.match(line):
            live.pop(int(closed[1]), None)
    return dropped


def attempts_of(argvs: Iterable[Sequence[str]]) -> tuple[str, ...]:
    """The attempt dirs of the attempt wrappers (`sh DIR/run.sh DIR`, or screen holding one)
    among killed processes' command lines."""
    dirs = {argv[i + 1] for argv in argvs for i, arg in enumerate(argv[:-1])
            if arg.endswith("/run.sh")}
    return tuple(sorted(dirs))


def fault_trace(fault: Fault, records: HostRecords) -> str | None:
    """The trace `fault` left on the hosts (None: none, so it does not count as effective)."""
    if fault.kind == "kill9":
        return _kill_trace(fault)
    if fault.kind == "corrupt_state":
        return _recovery_trace(fault)
    if fault.kind == "cut_host":
        dropped = [d for d in dropped_connections(records.sshd_logs.get(fault.host or "", ()))
                   if d.up_since < fault.t0 and fault.t0 <= d.restarted <= fault.t1]
        ports = ", ".join(f"{d.user} port {d.port}" for d in dropped)
        return f"{fault.host}: sshd dropped {len(dropped)} live connection(s) ({ports})" \
            if dropped else None
    if fault.kind == "disk_full":
        refused = [w for w in records.refused_writes.get(fault.host or "", ())
                   if fault.t0 - CLOCK_TICK_S <= w.t <= fault.t1 + CLOCK_TICK_S]
        return f"{fault.host}: {len(refused)} record(s) left empty: " \
            f"{', '.join(w.path for w in refused[:3])}" if refused else None
    if fault.kind == "reboot":
        killed = {(r.pid, r.job) for r in records.runs if r.host == fault.host
                  and r.ended_by == "reboot" and r.end == fault.t0}  # a process, not a GPU
        if not (killed or fault.sessions_killed):
            return None
        return f"{len(killed)} run(s) on {fault.host} killed, " \
            f"{len(fault.sessions_killed)} attempt wrapper(s)"
    if fault.kind == "second_engine":
        theirs = [r for r in records.runs if r.job.startswith(f"{fault.engine}-")
                  and r.start >= fault.t0]
        return f"{len(theirs)} run(s) of {fault.engine}" if theirs else None
    raise ValueError(f"unknown fault kind {fault.kind!r}")


def _kill_trace(fault: Fault) -> str | None:
    kill = fault.kill
    if kill is None or kill.status != SIGKILL_STATUS or kill.successor is None:
        return None
    if kill.lock_at_kill.strip() != str(fault.pid):
        return None  # the lock was not its own: it was not running the queue
    if kill.lock_after.strip() != str(kill.successor):
        return None
    return f"engine pid {fault.pid} reaped by SIGKILL holding engine.lock; " \
        f"pid {kill.successor} took the lock"


def _recovery_trace(fault: Fault) -> str | None:
    state = fault.recovery
    if state is None or state.parses_after or state.good_generation is None \
            or state.recovered_generation is None:
        return None
    if state.recovered_generation <= state.good_generation:
        return None
    if not state.good_completed <= state.recovered_completed:
        return None  # jobs the good copy had completed are not completed any more
    return f"state file unparseable after the refused start; recovered from generation " \
        f"{state.good_generation} ({len(state.good_completed)} completed) to " \
        f"{state.recovered_generation}"
