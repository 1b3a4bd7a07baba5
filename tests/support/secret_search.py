"""Where a secret must never be: any file under a directory, any process's command line."""

from __future__ import annotations

import stat
import time
from collections.abc import Callable
from pathlib import Path


def files_holding(root: Path, value: bytes, since: float | None = None) -> list[str]:
    """Files under root holding value; with `since` (a time.time()), only those written since:
    a secret made for one test can be in no older file, and a home the whole suite shares
    holds every earlier test's run."""
    found = []
    for path in root.rglob("*"):
        try:
            info = path.lstat()
            if not stat.S_ISREG(info.st_mode) or (since is not None and info.st_mtime < since):
                continue
            if value in path.read_bytes():
                found.append(str(path))
        except OSError:
            continue  # gone meanwhile
    return found


def command_lines_holding(value: bytes) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue  # gone meanwhile
            if value in cmdline:
                found.append(f"{entry.name}: {cmdline!r}")
    return found


def poll(predicate: Callable[[], bool], what: str, timeout: float = 60.0,
         interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)
