"""Keeps one watcher per host in step with what the engine waits for there.

After every tick the engine says, per host, which attempts it waits to see exit and which GPUs
it waits to see released (`sync`). A host whose wanted set changed gets a fresh watcher (the
old one is stopped first, so a host never holds two). Facts the watchers report reach the
engine through `notify`; an attempt's exit is reported once, however often its watcher is
restarted. A watcher that fails is retried after a pause; the periodic probe covers the gap.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eq_tui.hosts.base import Host
from eq_tui.hosts.watch import WatchEnd, WatchEvent, WatchingHost, WatchRequest

RETRY_AFTER_FAILURE_S = 5.0


@dataclass
class _Running:
    request: WatchRequest
    task: asyncio.Task[None] | None = None
    ended: WatchEnd | None = None
    failed_at: float | None = None


class HostWatchers:
    def __init__(self, hosts: Mapping[str, Host],
                 notify: Callable[[str, WatchEvent], None], *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._hosts = {name: host for name, host in hosts.items()
                       if isinstance(host, WatchingHost)}
        self._notify = notify
        self._clock = clock
        self._running: dict[str, _Running] = {}
        self._reported: dict[str, set[tuple[str, str]]] = {name: set() for name in self._hosts}
        self._closed = False
        self.started = 0  # watchers started (tests/integration/test_watch.py reads it)

    def covers_gpus(self, host: str) -> bool:
        """Whether a GPU release on this host will be reported as it happens: its watcher reads
        GPUs and has not failed. One that ended with nothing left to watch (its last attempt
        exited, none of its GPUs asked for) counts: the sync after this tick starts it again
        with whatever is asked for then."""
        watcher = self._running.get(host)
        return (watcher is not None and watcher.failed_at is None
                and self._hosts[host].watches_gpus)

    def watching(self, host: str) -> bool:
        """A watcher runs on this host now (started, not ended, not failed)."""
        watcher = self._running.get(host)
        return watcher is not None and watcher.ended is None and watcher.failed_at is None

    def sync(self, wanted: Mapping[str, WatchRequest]) -> None:
        """Start, restart or stop watchers so that each host watches what it is asked to."""
        if self._closed:
            return
        now = self._clock()
        for name in self._hosts:
            request = wanted.get(name) or WatchRequest()
            current = self._running.get(name)
            keys = {(a.key, a.attempt_dir) for a in request.attempts}
            self._reported[name] &= keys  # forget attempts no longer watched
            if current is not None:
                if current.failed_at is not None and now - current.failed_at < \
                        RETRY_AFTER_FAILURE_S:
                    continue
                if (current.request == request and current.failed_at is None
                        and current.ended in (None, "done")):
                    continue
                if current.task is not None and not current.task.done():
                    current.task.cancel()
                del self._running[name]
            if request.empty:
                continue
            self._start(name, request)

    def _start(self, name: str, request: WatchRequest) -> None:
        running = _Running(request=request)
        running.task = asyncio.create_task(self._run(name, running), name=f"watch-{name}")
        self._running[name] = running
        self.started += 1

    async def _run(self, name: str, running: _Running) -> None:
        try:
            running.ended = await self._hosts[name].watch(
                running.request, lambda event: self._relay(name, event))
            if running.ended == "closed":
                running.failed_at = self._clock()
        except asyncio.CancelledError:
            raise
        except Exception:  # unreachable host or a watcher bug: the periodic probe remains
            running.failed_at = self._clock()

    def _relay(self, name: str, event: WatchEvent) -> None:
        if event.kind == "exited" and event.key is not None:
            running = self._running.get(name)
            attempt = next((a for a in running.request.attempts if a.key == event.key),
                           None) if running else None
            if attempt is None:
                return
            mark = (attempt.key, attempt.attempt_dir)
            if mark in self._reported[name]:
                return
            self._reported[name].add(mark)
        self._notify(name, event)

    async def close(self) -> None:
        self._closed = True
        tasks = [running.task for running in self._running.values()
                 if running.task is not None and not running.task.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._running.clear()
