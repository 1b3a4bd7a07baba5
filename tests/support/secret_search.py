"""Where a secret must never be: any file under a directory, any process's command line."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def files_holding(root: Path, value: bytes) -> list[str]:
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and value in path.read_bytes():
                found.append(str(path))
        except OSError:
            continue  # a socket or fifo
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
