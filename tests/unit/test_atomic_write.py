"""runfiles/atomic.py: a file written whole or not at all, and, with the previous content kept
aside, never missing for a reader meanwhile (`eq-tui status` reads the state file while the
engine replaces it)."""

from __future__ import annotations

import threading
from pathlib import Path

from eq_tui.runfiles.atomic import write_atomic


def test_the_file_is_never_missing_while_it_is_replaced_and_its_last_content_kept(
        tmp_path: Path) -> None:
    path, previous = tmp_path / "state.json", tmp_path / "state.prev.json"
    write_atomic(path, "0", keep_previous=previous)
    missing: list[int] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                path.read_text()
            except FileNotFoundError:
                missing.append(1)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(1, 300):
            write_atomic(path, str(n), keep_previous=previous)
    finally:
        done.set()
        reader.join()
    assert missing == []
    assert (path.read_text(), previous.read_text()) == ("299", "298")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "state.prev.json"]


def test_the_first_write_has_nothing_to_keep(tmp_path: Path) -> None:
    path, previous = tmp_path / "state.json", tmp_path / "state.prev.json"
    assert write_atomic(path, ["a", "bc"], keep_previous=previous) == 3
    assert path.read_text() == "abc" and not previous.exists()
