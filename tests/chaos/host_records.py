"""Reading the records a fault's effect is judged from (tests/chaos/traces.py judges them): the
attempt records on a host's log disk, a host's sshd log, engine.lock and the state files."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from tests.chaos.traces import WRITTEN_WHOLE, RefusedWrite


def refused_writes(log_dir: Path, since: float = 0.0) -> list[RefusedWrite]:
    """The attempt records under a host's log dir (project/job/attempt) found empty, created
    at `since` or later."""
    found = []
    for attempt in log_dir.glob("*/*/a*"):
        for name in WRITTEN_WHOLE:
            with contextlib.suppress(OSError):
                stat = (attempt / name).stat()
                if stat.st_size == 0 and stat.st_mtime >= since:
                    found.append(RefusedWrite(str(attempt / name), stat.st_mtime))
    return sorted(found, key=lambda w: w.t)


def sshd_log(host_dir: Path) -> list[str]:
    try:
        return (host_dir / "sshd.log").read_text(errors="replace").splitlines()
    except OSError:
        return []


def lock_holder(run_dir: Path) -> str:
    """engine.lock's content: the pid of the engine that took the run dir last (empty once
    an engine released it)."""
    try:
        return (run_dir / "engine.lock").read_text()
    except OSError:
        return ""


def wait_lock_holder(run_dir: Path, pid: int, timeout: float = 30) -> str:
    """engine.lock once it names `pid` (an engine just started takes it), or when `timeout`
    ran out."""
    deadline = time.monotonic() + timeout
    while (held := lock_holder(run_dir)).strip() != str(pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # a harness poll, not a test's wait before an assertion
    return held


def state_summary(path: Path) -> tuple[int, frozenset[str]] | None:
    """A state file's generation and the jobs it calls completed; None when its bytes do not
    parse as a state."""
    try:
        data = json.loads(path.read_text())
        jobs = data["jobs"]
        return int(data.get("generation") or 0), frozenset(
            str(j["id"]) for j in jobs if j.get("status") == "completed")
    except (OSError, ValueError, TypeError, KeyError):
        return None


def wait_state_past(path: Path, generation: int, timeout: float = 30
                    ) -> tuple[int, frozenset[str]] | None:
    """The state file once an engine has written a generation after `generation` (or what it
    holds when `timeout` ran out)."""
    deadline = time.monotonic() + timeout
    while True:
        summary = state_summary(path)
        if (summary and summary[0] > generation) or time.monotonic() > deadline:
            return summary
        time.sleep(0.1)  # a harness poll, not a test's wait before an assertion
