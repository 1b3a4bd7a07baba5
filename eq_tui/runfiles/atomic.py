"""Durable file writes: a crash leaves the old content or the new, never a mix."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str | Iterable[str], *,
                 keep_previous: Path | None = None) -> int:
    """temp file + fsync + rename (+ fsync of the directory), so a crash leaves old or new.
    `text` may come in pieces, written as they come (a large file is never one string in
    memory). Returns the characters written."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    written = 0
    with open(tmp, "w", encoding="utf-8") as handle:
        for piece in (text,) if isinstance(text, str) else text:
            handle.write(piece)
            written += len(piece)
        handle.flush()
        os.fsync(handle.fileno())
    if keep_previous is not None and path.exists():
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, keep_previous)
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return written
