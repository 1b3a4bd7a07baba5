"""The per-host watcher: one long-lived command that reports, as they happen, the two facts the
next launch waits for — an attempt's exit record appearing and a GPU's memory being released.

The periodic probe stays the source of truth (the engine probes a host before acting on what
its watcher said); the watcher only says *when* to look, so a free GPU is seen within a
fraction of a second instead of at the next poll.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from eq_tui.errors import HostError
from eq_tui.hosts.runner import LineStream, StreamingRunner

WATCH_INTERVAL_S = 0.25
# while a GPU drains the next job waits on this reading: it is looked at more often then
DRAIN_INTERVAL_S = 0.1
WATCH_LIFETIME_S = 900
_FIELD_UNSAFE = frozenset("\t\n\r")

WatchEventKind = Literal["ready", "exited", "released", "error"]
WatchEnd = Literal["done", "lifetime", "closed"]


@dataclass(frozen=True)
class WatchedAttempt:
    key: str  # job id
    attempt_dir: str
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class WatchRequest:
    attempts: tuple[WatchedAttempt, ...] = ()
    draining: tuple[int, ...] = ()  # GPUs whose memory release is awaited
    threshold_mib: int = 500
    interval_s: float = WATCH_INTERVAL_S
    lifetime_s: int = WATCH_LIFETIME_S
    drain_interval_s: float = DRAIN_INTERVAL_S

    @property
    def empty(self) -> bool:
        return not self.attempts and not self.draining


@dataclass(frozen=True)
class WatchEvent:
    kind: WatchEventKind
    key: str | None = None  # exited: the job id
    gpu: int | None = None  # released: the GPU index
    used_mib: int | None = None
    detail: str = ""


@runtime_checkable
class WatchingHost(Protocol):
    """A host that can run a watcher (shell hosts: local, simulated, ssh)."""

    @property
    def watches_gpus(self) -> bool:
        """Whether its watcher reports GPU memory releases (not when NVML reads the GPUs)."""
        ...

    async def watch(self, request: WatchRequest,
                    on_event: Callable[[WatchEvent], None]) -> WatchEnd:
        """Run a watcher until it ends; report each fact through on_event."""
        ...


def watch_stdin(request: WatchRequest) -> bytes:
    lines = []
    for attempt in request.attempts:
        if _FIELD_UNSAFE & set(attempt.key + attempt.attempt_dir):
            raise HostError(f"attempt {attempt.key!r}: a tab or newline in its key or directory")
        gpus = ",".join(str(g) for g in attempt.gpus) or "-"
        lines.append(f"A\t{attempt.key}\t{attempt.attempt_dir}\t{gpus}\n")
    lines.extend(f"G\t{gpu}\n" for gpu in request.draining)
    return "".join(lines).encode()


def parse_watch_line(line: str) -> WatchEvent | WatchEnd | None:
    """One output line of watch.sh: an event, how the watcher ended, or None (heartbeat or
    noise)."""
    parts = line.rstrip("\n").split("\t")
    kind = parts[0]
    if kind == "R":
        return WatchEvent("ready")
    if kind == "X" and len(parts) == 2 and parts[1]:
        return WatchEvent("exited", key=parts[1])
    if kind == "F" and len(parts) == 3 and parts[1].isdigit():
        used = int(parts[2]) if parts[2].isdigit() else None
        return WatchEvent("released", gpu=int(parts[1]), used_mib=used)
    if kind == "E":
        return WatchEvent("error", detail="\t".join(parts[1:])[:300])
    if kind == "Q" and len(parts) == 2 and parts[1] in ("done", "lifetime"):
        return "done" if parts[1] == "done" else "lifetime"
    return None


async def run_watch(runner: StreamingRunner, script: str, request: WatchRequest, *,
                    query_gpus: bool, on_event: Callable[[WatchEvent], None]) -> WatchEnd:
    """Start watch.sh through the runner and relay its lines until it ends."""
    args = [f"{request.interval_s:g}", str(request.threshold_mib), "1" if query_gpus else "0",
            str(request.lifetime_s), f"{min(request.drain_interval_s, request.interval_s):g}"]
    stream: LineStream = await runner.stream(script, args, stdin=watch_stdin(request))
    try:
        while True:
            raw = await stream.readline()
            if not raw:
                return "closed"
            parsed = parse_watch_line(raw.decode("utf-8", errors="replace"))
            if isinstance(parsed, WatchEvent):
                on_event(parsed)
            elif parsed is not None:
                return parsed
    finally:
        with contextlib.suppress(Exception):
            await stream.close()
