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
    if keep_previous is not None:
        _keep(path, keep_previous)
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return written


def _keep(path: Path, previous: Path) -> None:
    """`path`'s content as `previous` too, with `path` never missing meanwhile (a reader of the
    state file, `eq-tui status`, must find one): a second name for the file, moved into place;
    where the file system has no hard links, the file itself moves (the old way)."""
    linked = previous.with_name(f".{previous.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        linked.unlink()
    try:
        os.link(path, linked)
    except FileNotFoundError:
        return
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, previous)
        return
    os.replace(linked, previous)
