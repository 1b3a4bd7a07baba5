"""queue_state.json: the whole run state, jq-friendly, with a journal of changes at scale.

A small state is rewritten whole on every change (temp file, fsync, rename, the previous copy
kept). A large one (10,000 jobs is about 4 MB) is not: each change appends just the changed
job records to queue_state.journal.jsonl (fsync'd, so `launching` is on disk before a session
starts), and the state file is rewritten whole — compacted — when the journal reaches a fair
fraction of its size, when its oldest line is some seconds old, and when the engine stops.
Loading is the state file with the journal replayed (see journal.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from eq_tui.errors import RunDirError
from eq_tui.runfiles.atomic import fsync_dir, write_atomic
from eq_tui.runfiles.journal import encode_line, replay

SMALL_STATE_BYTES = 256 * 1024  # below this, every change rewrites the state file whole
COMPACT_FRACTION = 0.25  # compact when the journal reaches this fraction of the state's size
COMPACT_AFTER_S = 15.0  # ... or when its oldest line is this old (queue_state.json stays current)
_NOT_FIELDS = ("jobs", "generation")


class StateFile:
    def __init__(self, directory: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = directory / "queue_state.json"
        self.previous = directory / "queue_state.prev.json"
        self.journal = directory / "queue_state.journal.jsonl"
        self.small_bytes = SMALL_STATE_BYTES
        self.compact_fraction = COMPACT_FRACTION
        self.compact_after_s = COMPACT_AFTER_S
        self.bytes_written = 0  # state file and journal, by this process
        self.compactions = 0
        self.appends = 0
        self._clock = clock
        self._generation = 0
        self._written = False  # written whole by this process (the journal is ours from then)
        self._fields: dict[str, str] = {}  # top-level field -> its JSON text as last written
        self._jobs: dict[str, str] = {}  # job id -> its record's JSON text, in state order
        self._whole_bytes = 0
        self._journal_fd: int | None = None
        self._journal_bytes = 0
        self._journal_since: float | None = None  # when its oldest line was written
        self._journal_suspect = False  # a write or truncation failed: compact before appending

    # ---- reading -----------------------------------------------------------------------------

    def load(self) -> dict[str, Any] | None:
        """The saved state with the journal replayed, or None for a new run. A file that fails
        to parse is never overwritten: stop and say how to recover from the previous copy."""
        source = self.path
        if not source.exists():
            if not self.previous.exists():
                self._generation = max(self._generation,
                                       replay({"jobs": []}, self.journal).newest_generation)
                return None
            source = self.previous
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
                raise ValueError("not an eq-tui state (no 'jobs' list)")
        except (ValueError, UnicodeDecodeError) as exc:
            hint = ""
            if self.previous.exists() and source != self.previous:
                hint = (f"; the previous good copy is {self.previous}: "
                        f"`cp {self.previous} {self.path}` to recover from it")
            raise RunDirError(f"{source} is unreadable ({exc}){hint}") from None
        replayed = replay(data, self.journal)
        self._generation = max(self._generation, int(data.get("generation") or 0),
                               replayed.newest_generation)
        return data

    # ---- writing -----------------------------------------------------------------------------

    def write_whole(self, data: Mapping[str, Any]) -> None:
        """The whole state, as the engine holds it (at start, when the queue finishes); its
        `jobs` may be any iterable of records (each is serialised as it comes)."""
        self._fields = {key: json.dumps(value) for key, value in data.items()
                        if key not in _NOT_FIELDS}
        self._jobs = {str(job["id"]): json.dumps(job) for job in data["jobs"]}
        self._compact()

    def write_changes(self, fields: Mapping[str, Any], jobs: Iterable[Mapping[str, Any]]) -> None:
        """The top-level fields (only those that changed are written) and the job records
        that changed since the last write."""
        if not self._written:
            raise RuntimeError("the state must be written whole once before its changes")
        job_texts = []
        for job in jobs:
            text = json.dumps(job)
            self._jobs[str(job["id"])] = text
            job_texts.append(text)
        changed = {}
        for key, value in fields.items():
            text = json.dumps(value)
            if key not in _NOT_FIELDS and self._fields.get(key) != text:
                self._fields[key] = changed[key] = text
        if self._whole_bytes < self.small_bytes or self._journal_suspect \
                or self.compaction_due():
            self._compact()
            return
        line = encode_line(self._generation, changed, job_texts)
        if self._journal_bytes + len(line) > self.compact_fraction * self._whole_bytes:
            self._compact()
            return
        self._append(line)

    def compaction_due(self) -> bool:
        """The journal's oldest line is old enough that the state file should absorb it."""
        return (self._journal_since is not None
                and self._clock() - self._journal_since >= self.compact_after_s)

    def close(self) -> None:
        """Compact what the journal holds (it stays valid if that fails), release the file."""
        try:
            if self._written and self._journal_bytes:
                self._compact()
        except OSError:
            pass
        finally:
            if self._journal_fd is not None:
                os.close(self._journal_fd)
                self._journal_fd = None

    def _compact(self) -> None:
        self._generation += 1
        # json.dumps escapes to ASCII: characters are bytes
        size = write_atomic(self.path, self._render(), keep_previous=self.previous)
        self.bytes_written += size
        self.compactions += 1
        self._written = True
        self._whole_bytes = size
        # From here the journal's lines carry an older generation than the state file: a
        # crash before the truncation leaves them ignored, never applied twice.
        self._journal_suspect = True
        if self._journal_fd is not None:
            os.ftruncate(self._journal_fd, 0)
        elif self.journal.exists():
            os.truncate(self.journal, 0)
        self._journal_bytes = 0
        self._journal_since = None
        self._journal_suspect = False

    def _render(self) -> Iterator[str]:
        """Top-level fields, then one job record per line: valid JSON for jq, cheap to build
        from the records kept since they last changed. In pieces: at 10,000 jobs the whole
        text (and its encoded copy) would double the engine's memory while it is written."""
        generation = f' "generation": {self._generation}'
        lines = [] if "version" in self._fields else [generation]
        for key, text in self._fields.items():
            lines.append(f" {json.dumps(key)}: {text}")
            if key == "version":
                lines.append(generation)
        yield "{\n" + ",\n".join(lines) + ',\n "jobs": [\n'
        separator = ""
        for text in self._jobs.values():
            yield separator
            yield text
            separator = ",\n"
        yield "\n ]\n}\n"

    def _append(self, line: bytes) -> None:
        try:
            if self._journal_fd is None:
                created = not self.journal.exists()
                self._journal_fd = os.open(self.journal,
                                           os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
                if created:
                    fsync_dir(self.journal.parent)
            view = memoryview(line)
            while view:
                view = view[os.write(self._journal_fd, view):]
            os.fsync(self._journal_fd)
        except OSError:
            self._journal_suspect = True  # maybe a torn line: the next write compacts
            raise
        self.bytes_written += len(line)
        self.appends += 1
        self._journal_bytes += len(line)
        if self._journal_since is None:
            self._journal_since = self._clock()
