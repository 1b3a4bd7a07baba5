"""The state file and its journal: append, replay, a torn line, compaction, and crashes
between compaction's steps."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from eq_tui.engine.statefile import StateFile
from eq_tui.errors import RunDirError


def job(i: int, status: str = "pending", **extra: Any) -> dict[str, Any]:
    return {"id": f"j{i}", "phase": "main", "status": status, "cmd": f"run {i} " + "x" * 200,
            **extra}


def state(n: int, updated: float = 1.0) -> dict[str, Any]:
    return {"version": 1, "project": "p", "updated": updated, "paused": False,
            "jobs": [job(i) for i in range(n)]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def journaled(tmp_path: Path, n: int = 50) -> tuple[StateFile, Clock]:
    """A state file that journals every change (as a large one would)."""
    clock = Clock()
    store = StateFile(tmp_path, clock=clock)
    store.small_bytes = 0
    store.write_whole(state(n))
    return store, clock


def raw_state(store: StateFile) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(store.path.read_text())
    return data


def statuses(data: dict[str, Any]) -> dict[str, str]:
    return {j["id"]: j["status"] for j in data["jobs"]}


def test_a_small_state_is_rewritten_whole_and_keeps_no_journal(tmp_path: Path) -> None:
    store = StateFile(tmp_path)
    store.write_whole(state(5))
    store.write_changes({"updated": 2.0}, [job(1, "running")])
    assert statuses(raw_state(store))["j1"] == "running"
    assert raw_state(store)["updated"] == 2.0
    assert not store.journal.exists() or store.journal.stat().st_size == 0
    assert statuses(json.loads(store.previous.read_text()))["j1"] == "pending"


def test_changes_are_appended_and_replayed_on_load(tmp_path: Path) -> None:
    store, _clock = journaled(tmp_path)
    whole = store.path.read_bytes()
    before = store.bytes_written
    store.write_changes({"updated": 2.0, "paused": True}, [job(3, "running")])
    store.write_changes({"updated": 3.0, "paused": True}, [job(3, "completed"), job(4, "stuck")])
    assert store.path.read_bytes() == whole  # not rewritten
    lines = store.journal.read_text().splitlines()
    assert len(lines) == 2
    assert '"paused"' in lines[0] and '"paused"' not in lines[1]  # only fields that changed
    assert store.bytes_written - before == store.journal.stat().st_size < len(whole) / 10

    loaded = StateFile(tmp_path).load()
    assert loaded is not None
    assert loaded["updated"] == 3.0 and loaded["paused"] is True
    assert statuses(loaded) == {**statuses(state(50)), "j3": "completed", "j4": "stuck"}
    assert [j["id"] for j in loaded["jobs"]] == [f"j{i}" for i in range(50)]


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    store, _clock = journaled(tmp_path)
    store.write_changes({"updated": 2.0}, [job(1, "running")])
    store.write_changes({"updated": 3.0}, [job(2, "running")])
    text = store.journal.read_bytes()
    store.journal.write_bytes(text[:-40])  # a crash mid-write cut the second line
    loaded = StateFile(tmp_path).load()
    assert loaded is not None
    assert loaded["updated"] == 2.0
    assert statuses(loaded)["j1"] == "running" and statuses(loaded)["j2"] == "pending"


def test_the_journal_is_compacted_at_a_fraction_of_the_state_and_after_some_seconds(
        tmp_path: Path) -> None:
    store, clock = journaled(tmp_path)
    store.compact_fraction = 0.1  # a few job records of a 50-job state
    generation = raw_state(store)["generation"]
    for i in range(6):
        store.write_changes({"updated": 2.0 + i}, [job(i, "completed")])
    # write_whole, then each time the journal would pass 10% of the state; between, appends
    assert 1 < store.compactions < 6
    assert raw_state(store)["generation"] == generation + store.compactions - 1
    assert 0 < store.journal.stat().st_size <= 0.1 * store.path.stat().st_size
    loaded = StateFile(tmp_path).load()
    assert loaded is not None and [s for s in statuses(loaded).values()].count("completed") == 6
    store.compact_fraction = 1.0
    assert not store.compaction_due()
    clock.now += store.compact_after_s
    assert store.compaction_due()
    store.write_changes({"updated": 9.0}, [])
    assert store.journal.stat().st_size == 0 and not store.compaction_due()
    data = raw_state(store)
    assert data["updated"] == 9.0
    assert [s for s in statuses(data).values()].count("completed") == 6


def test_close_compacts_what_the_journal_holds(tmp_path: Path) -> None:
    store, _clock = journaled(tmp_path)
    store.write_changes({"updated": 2.0}, [job(7, "killed")])
    store.close()
    assert store.journal.stat().st_size == 0
    assert statuses(raw_state(store))["j7"] == "killed"


def test_a_crash_between_the_rename_and_the_truncation_ignores_the_old_lines(
        tmp_path: Path) -> None:
    store, _clock = journaled(tmp_path)
    store.write_changes({"updated": 2.0}, [job(1, "running")])
    old_lines = store.journal.read_bytes()
    # the compaction that follows a later change: the new state is renamed in, but the
    # crash comes before the journal is emptied
    store.write_changes({"updated": 3.0}, [job(1, "completed")])
    store.write_whole({**state(50, updated=3.0),
                       "jobs": [job(i, "completed" if i == 1 else "pending") for i in range(50)]})
    store.journal.write_bytes(old_lines + store.journal.read_bytes())
    loaded = StateFile(tmp_path).load()
    assert loaded is not None
    assert statuses(loaded)["j1"] == "completed"  # not taken back to running by an old line
    assert loaded["updated"] == 3.0


def test_a_crash_between_the_two_renames_loads_the_previous_copy_and_its_journal(
        tmp_path: Path) -> None:
    store, _clock = journaled(tmp_path)
    store.write_changes({"updated": 2.0}, [job(1, "running")])
    # write_atomic moved the state to .prev and died before renaming the new one in
    os.replace(store.path, store.previous)
    loaded = StateFile(tmp_path).load()
    assert loaded is not None
    assert statuses(loaded)["j1"] == "running" and loaded["updated"] == 2.0


def test_recovering_from_the_previous_copy_applies_newer_lines_but_keeps_its_time(
        tmp_path: Path) -> None:
    store, _clock = journaled(tmp_path)
    store.write_changes({"updated": 2.0}, [job(1, "running")])
    store.write_whole({**state(50, updated=2.5),
                       "jobs": [job(i, "running" if i == 1 else "pending") for i in range(50)]})
    store.write_changes({"updated": 3.0}, [job(2, "running")])
    store.path.write_text(store.path.read_text()[:200])  # truncated by something
    with pytest.raises(RunDirError, match=r"cp .*queue_state\.prev\.json"):
        StateFile(tmp_path).load()
    shutil.copy(store.previous, store.path)  # as the error advises
    loaded = StateFile(tmp_path).load()
    assert loaded is not None
    # the copy predates j1's launch (its journal line went with the compaction); the newer
    # journal line still brings j2's
    assert statuses(loaded)["j1"] == "pending" and statuses(loaded)["j2"] == "running"
    assert loaded["updated"] == 1.0  # launches since the copy are replayed from events.jsonl
    # the next compaction's generation is newer than the lines it leaves behind
    newer_lines = store.journal.read_bytes()
    again = StateFile(tmp_path)
    assert again.load() is not None
    again.write_whole(loaded)
    assert raw_state(again)["generation"] == 3
    again.journal.write_bytes(newer_lines)
    reloaded = StateFile(tmp_path).load()
    assert reloaded is not None and reloaded["updated"] == 1.0  # the gen-2 line is ignored


def test_a_failed_append_makes_the_next_write_compact(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    store, _clock = journaled(tmp_path)
    compactions = store.compactions

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", full_disk)
        with pytest.raises(OSError):
            store.write_changes({"updated": 2.0}, [job(1, "running")])
    store.write_changes({"updated": 3.0}, [job(2, "running")])
    assert store.compactions == compactions + 1
    data = raw_state(store)
    assert statuses(data)["j1"] == "running" and statuses(data)["j2"] == "running"


def test_the_state_file_works_with_jq_style_grouping(tmp_path: Path) -> None:
    store, _clock = journaled(tmp_path, n=4)
    store.write_whole({**state(4), "jobs": [job(0, "completed"), job(1), job(2), job(3)]})
    data = raw_state(store)
    counts: dict[str, int] = {}
    for record in data["jobs"]:
        counts[record["status"]] = counts.get(record["status"], 0) + 1
    assert counts == {"completed": 1, "pending": 3}
    if shutil.which("jq"):
        import subprocess

        out = subprocess.run(
            ["jq", "-c", ".jobs | group_by(.status) | map({(.[0].status): length}) | add",
             str(store.path)], capture_output=True, text=True, check=True).stdout
        assert json.loads(out) == counts
