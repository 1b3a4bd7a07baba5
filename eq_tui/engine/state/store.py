"""The run directory: lock, state file (see statefile.py), event history, expanded manifest,
summary."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from eq_tui.errors import RunDirError
from eq_tui.runfiles.atomic import write_atomic
from eq_tui.runfiles.statefile import StateFile

STATE_VERSION = 1


def archive_run_dir(path: Path) -> Path | None:
    """Move an existing run dir aside (for --fresh); returns where it went."""
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{stamp}-{n}")
    path.rename(target)
    return target


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.state = StateFile(path)
        self.state_file = self.state.path
        self.previous_state_file = self.state.previous
        self.journal_file = self.state.journal
        self.events_file = path / "events.jsonl"
        self.manifest_file = path / "manifest.json"
        self.summary_file = path / "summary.md"
        self.lock_file = path / "engine.lock"
        self.logs = path / "logs"
        self._lock_handle: IO[str] | None = None
        self._events: IO[str] | None = None
        self._made_logs = False

    def create(self) -> bool:
        """Make the run dir; True when no run has been recorded in it yet."""
        new = not (self.state_file.exists() or self.previous_state_file.exists())
        self._made_logs = not self.logs.exists()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self.logs.mkdir(exist_ok=True)
        except OSError as exc:
            raise RunDirError(f"cannot create run dir {self.path}: {exc.strerror}") from exc
        return new

    def remove_new(self) -> None:
        """Undo create() for a run that never started (refused at preflight): remove the files
        eq-tui writes here and the logs folder if create() made it, then the directory if
        nothing else is in it (what was there before is never touched)."""
        import shutil

        for path in (self.state_file, self.previous_state_file, self.journal_file,
                     self.events_file, self.manifest_file, self.lock_file):
            with contextlib.suppress(OSError):
                path.unlink()
        if self._made_logs:
            shutil.rmtree(self.logs, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.path.rmdir()

    def acquire_lock(self) -> str | None:
        """Take the engine lock; returns a note when a dead engine's lock was taken over.

        flock is released by the kernel when its holder dies, so a lock file left by a dead
        engine is simply taken over; the pid inside names the previous holder.
        """
        handle = open(self.lock_file, "a+", encoding="utf-8")  # noqa: SIM115 - held for the run
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise RunDirError(
                f"run dir {self.path} is in use by another engine (pid {holder}); "
                f"attach to it with `eq-tui attach {self.path}` or stop it with "
                f"`eq-tui stop {self.path}`") from None
        handle.seek(0)
        previous = handle.read().strip()
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._lock_handle = handle
        if previous and previous != str(os.getpid()):
            return f"took over the lock of engine pid {previous}, which is no longer running"
        return None

    def release_lock(self) -> None:
        self.state.close()  # compacts the journal while the lock still keeps others away
        if self._lock_handle is not None:
            with contextlib.suppress(OSError):
                self._lock_handle.seek(0)
                self._lock_handle.truncate()
                fcntl.flock(self._lock_handle.fileno(), fcntl.LOCK_UN)
            self._lock_handle.close()
            self._lock_handle = None
        if self._events is not None:
            self._events.close()
            self._events = None

    def load_state(self) -> dict[str, Any] | None:
        """The saved state (the state file with its journal replayed), or None for a new run."""
        return self.state.load()

    def save_state(self, data: dict[str, Any]) -> None:
        """The whole state: the state file is rewritten and the journal emptied."""
        self.state.write_whole(data)

    def save_changes(self, fields: dict[str, Any], jobs: list[dict[str, Any]]) -> None:
        """Top-level fields and the changed job records: journaled when the state is large."""
        self.state.write_changes(fields, jobs)

    def write_manifest(self, data: dict[str, Any]) -> None:
        """The expanded manifest; its `source` absolute, so that a command run from anywhere
        (a shell verb that starts the engine again) finds the file."""
        if data.get("source"):
            data = {**data, "source": str(Path(data["source"]).resolve())}
        write_atomic(self.manifest_file, _one_record_per_line(data))

    def append_event(self, data: dict[str, Any]) -> None:
        if self._events is None:
            self._events = open(self.events_file, "a", encoding="utf-8")  # noqa: SIM115
        self._events.write(json.dumps(data, default=str) + "\n")
        self._events.flush()

    def read_events(self, *, since: float = 0.0) -> list[dict[str, Any]]:
        """Journal entries at or after `since`; a torn last line (a crash mid-write) is skipped."""
        events: list[dict[str, Any]] = []
        try:
            with open(self.events_file, encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(event, dict) and float(event.get("at") or 0.0) >= since:
                        events.append(event)
        except FileNotFoundError:
            pass
        return events

    def write_summary(self, text: str) -> None:
        write_atomic(self.summary_file, text)


def _one_record_per_line(data: dict[str, Any]) -> Iterator[str]:
    """A JSON object with a top-level field per line and each element of its lists on a line
    of its own: still one JSON document, and written piece by piece (an indented dump of
    10,000 jobs holds several times the file's size in memory while it is built)."""
    yield "{"
    separator = "\n"
    for key, value in data.items():
        yield f"{separator} {json.dumps(key)}: "
        separator = ",\n"
        if isinstance(value, list) and value:
            yield "[\n  " + json.dumps(value[0], default=str)
            for item in value[1:]:
                yield ",\n  " + json.dumps(item, default=str)
            yield "\n ]"
        else:
            yield json.dumps(value, default=str)
    yield "\n}\n"
