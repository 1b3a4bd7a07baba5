"""The state file and its journal: append, replay, a torn line, compaction, and crashes
between compaction's steps."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from eq_tui.errors import RunDirError
from eq_tui.runfiles.statefile import StateFile


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


# ---- the file contract, counters and edges (what mutation testing found unpinned) ----------

def test_the_files_are_named_as_documented_and_the_generation_follows_version(
        tmp_path: Path) -> None:
    store, _clock = journaled(tmp_path)
    store.write_changes({"updated": 2.0}, [job(1, "running")])
    assert store.appends == 1
    store.write_whole(state(50, updated=3.0))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "queue_state.journal.jsonl", "queue_state.json", "queue_state.prev.json"]
    lines = store.path.read_text().splitlines()
    assert lines[:3] == ["{", ' "version": 1,', ' "generation": 2,']
    bare = StateFile(tmp_path / "bare")
    (tmp_path / "bare").mkdir()
    bare.write_whole({"jobs": [job(0)], "updated": 1.0})
    assert bare.path.read_text().splitlines()[:3] == ["{", ' "generation": 1,',
                                                      ' "updated": 1.0,']


def test_bytes_and_appends_are_counted(tmp_path: Path) -> None:
    store = StateFile(tmp_path, clock=Clock())
    store.small_bytes = 0
    assert (store.bytes_written, store.appends, store.compactions) == (0, 0, 0)
    store.write_whole(state(20))
    whole = store.path.stat().st_size
    assert store.bytes_written == whole and store.compactions == 1
    store.write_changes({"updated": 2.0}, [job(1, "running")])
    store.write_changes({"updated": 3.0}, [job(2, "running")])
    assert store.appends == 2
    journal = store.journal.stat().st_size
    assert store.bytes_written == whole + journal
    store.write_whole(state(20, updated=9.0))  # a second compaction adds its bytes too
    assert store.bytes_written == whole + journal + store.path.stat().st_size


def test_changes_before_the_first_whole_write_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError,
                       match=r"^the state must be written whole once before its changes$"):
        StateFile(tmp_path).write_changes({"updated": 1.0}, [])


def test_a_state_exactly_at_the_small_size_is_journaled(tmp_path: Path) -> None:
    store = StateFile(tmp_path, clock=Clock())
    store.write_whole(state(20))
    store.small_bytes = store.path.stat().st_size
    store.write_changes({"updated": 2.0}, [job(1, "running")])
    assert store.appends == 1 and store.compactions == 1
    store.small_bytes += 1
    store.write_changes({"updated": 3.0}, [job(1, "completed")])
    assert store.compactions == 2


@pytest.mark.parametrize("text", ["[]", '{"jobs": {}}', '{"no": "jobs"}', '"jobs"'])
def test_a_file_that_is_not_a_state_is_refused_with_the_way_back(tmp_path: Path,
                                                                 text: str) -> None:
    store, _clock = journaled(tmp_path, n=2)
    store.write_whole(state(2, updated=2.0))  # a previous copy now exists
    store.path.write_text(text)
    with pytest.raises(RunDirError) as caught:
        StateFile(tmp_path).load()
    message = str(caught.value)
    assert message.startswith(f"{store.path} is unreadable (")
    if text.startswith("{"):
        assert f"{store.path} is unreadable (not an eq-tui state (no 'jobs' list));" in message
    assert message.endswith(f"); the previous good copy is {store.previous}: "
                            f"`cp {store.previous} {store.path}` to recover from it")


def test_a_broken_previous_copy_gives_no_advice_to_copy_itself(tmp_path: Path) -> None:
    store = StateFile(tmp_path)
    store.previous.write_text("{ torn")
    with pytest.raises(RunDirError) as caught:
        store.load()
    assert str(caught.value).startswith(f"{store.previous} is unreadable (")
    assert str(caught.value).endswith(")")  # and no advice to copy it onto itself


def test_a_new_state_outnumbers_a_leftover_journal(tmp_path: Path) -> None:
    # lines left by an earlier run whose state file is gone must not apply to the new one
    (tmp_path / "queue_state.journal.jsonl").write_text(
        '{"gen": 5, "set": {}, "jobs": [{"id": "j0", "status": "completed"}]}\n')
    store = StateFile(tmp_path)
    assert store.load() is None
    store.write_whole(state(2))
    assert raw_state(store)["generation"] == 6
    assert store.journal.stat().st_size == 0  # emptied by the compaction, not by an fd of ours
    loaded = StateFile(tmp_path).load()
    assert loaded is not None and statuses(loaded)["j0"] == "pending"


def test_a_loaded_state_keeps_counting_its_generation(tmp_path: Path) -> None:
    first = StateFile(tmp_path)
    first.write_whole(state(2))
    first.write_whole(state(2))
    first.close()
    assert raw_state(first)["generation"] == 2
    again = StateFile(tmp_path)
    assert again.load() is not None
    again.write_whole(state(2))
    assert raw_state(again)["generation"] == 3


def test_close_without_a_journal_rewrites_nothing_and_can_be_repeated(tmp_path: Path) -> None:
    store = StateFile(tmp_path)
    store.write_whole(state(2))
    store.close()
    store.close()
    assert store.compactions == 1
    (tmp_path / "j").mkdir()
    journaling, _clock = journaled(tmp_path / "j")
    journaling.write_changes({"updated": 2.0}, [job(1, "running")])
    journaling.close()
    journaling.close()
    assert journaling.compactions == 2


def test_the_journal_is_created_readable_by_others(tmp_path: Path) -> None:
    store, _clock = journaled(tmp_path)
    store.write_changes({"updated": 2.0}, [job(1, "running")])
    umask = os.umask(0)
    os.umask(umask)
    assert store.journal.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_state_without_a_generation_counts_from_zero(tmp_path: Path) -> None:
    (tmp_path / "queue_state.json").write_text(json.dumps(state(2)))  # an older eq-tui's file
    store = StateFile(tmp_path)
    assert store.load() is not None
    store.write_whole(state(2))
    assert raw_state(store)["generation"] == 1


def test_a_compaction_that_fails_midway_makes_the_next_write_compact(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import eq_tui.runfiles.statefile as statefile

    store, _clock = journaled(tmp_path)
    store.write_changes({"updated": 2.0}, [job(1, "running")])
    compactions = store.compactions

    def broken(fd: int, length: int) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(statefile.os, "ftruncate", broken)
        with pytest.raises(OSError):
            store.write_whole(state(50, updated=3.0))  # renamed, but the journal not emptied
    # the journal may hold lines of an older generation: the next change compacts, no append
    store.write_changes({"updated": 4.0}, [job(2, "running")])
    assert store.compactions == compactions + 2 and store.appends == 1
    assert store.journal.stat().st_size == 0


# ---- what the 2026-11-23 list called equivalent, and inputs tell apart ------------------------

def test_a_state_file_not_written_yet_is_not_due_for_compaction(tmp_path: Path) -> None:
    # the engine asks every tick (Persistence.due), from before its first whole write
    store = StateFile(tmp_path, clock=Clock())
    assert store.compaction_due() is False
    store.load()
    assert store.compaction_due() is False


def test_loading_never_takes_the_generation_back(tmp_path: Path) -> None:
    """A state file put back from an older copy (`cp queue_state.prev.json ...`) while this
    StateFile has written newer generations: its next whole write still outnumbers every line
    it journaled, so none of them can apply to the new state."""
    store = StateFile(tmp_path, clock=Clock())
    store.write_whole(state(2))
    older = store.path.read_text()
    store.write_whole(state(2, updated=2.0))
    store.write_whole(state(2, updated=3.0))
    assert raw_state(store)["generation"] == 3
    store.path.write_text(older)
    assert store.load() is not None
    store.write_whole(state(2, updated=4.0))
    assert raw_state(store)["generation"] == 4


def _pad_to_four(tmp_path: Path, name: str, pad: int) -> StateFile:
    """A journaling store whose state file is a multiple of 4 bytes, so a quarter is exact."""
    for extra in range(4):
        store = StateFile(tmp_path / f"{name}{extra}", clock=Clock())
        store.path.parent.mkdir()
        store.small_bytes = 0
        store.compact_fraction = 0.25
        store.write_whole({**state(40), "note": "y" * extra})
        if store.path.stat().st_size % 4 == 0:
            return store
    raise AssertionError("unreachable: one of four sizes is a multiple of 4")


def test_the_journal_may_hold_exactly_its_fraction_of_the_state(tmp_path: Path) -> None:
    """Compaction comes when a line would take the journal past compact_fraction of the state
    file's size; a line that brings it to exactly that fraction is appended."""
    probe = _pad_to_four(tmp_path, "probe", 0)
    probe.write_changes({}, [job(1, "running", pad="")])
    bare = probe.journal.stat().st_size
    quarter = probe.path.stat().st_size // 4 if probe.compactions == 1 else None
    assert quarter is not None and bare < quarter
    exact = _pad_to_four(tmp_path, "exact", 0)
    assert exact.path.stat().st_size // 4 == quarter
    exact.write_changes({}, [job(1, "running", pad="x" * (quarter - bare))])
    assert exact.journal.stat().st_size == quarter
    assert (exact.appends, exact.compactions) == (1, 1)
    over = _pad_to_four(tmp_path, "over", 0)
    over.write_changes({}, [job(1, "running", pad="x" * (quarter - bare + 1))])
    assert (over.appends, over.compactions) == (0, 2)


def test_a_state_file_edited_by_jq_loads_the_same_under_a_c_locale(tmp_path: Path) -> None:
    """jq writes UTF-8 as it is (eq-tui writes ASCII escapes): under LC_ALL=C, with Python's
    locale coercion and UTF-8 mode off, the file is still read as UTF-8, not the locale's
    ASCII."""
    import subprocess
    import sys

    import eq_tui

    store = StateFile(tmp_path, clock=Clock())
    store.write_whole({**state(1), "jobs": [job(0, cmd="train --name café")]})
    store.path.write_text(store.path.read_text().replace("\\u00e9", "é"), encoding="utf-8")
    assert "é".encode() in store.path.read_bytes()
    # here, in a UTF-8 locale (and so that mutation testing maps this test to `load`)
    here = StateFile(tmp_path).load()
    assert here is not None and here["jobs"][0]["cmd"] == "train --name café"
    code = ("import sys; from pathlib import Path; from eq_tui.runfiles.statefile import "
            "StateFile; print(StateFile(Path(sys.argv[1])).load()['jobs'][0]['cmd'].encode())")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0",
           "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": "utf-8",
           "PYTHONPATH": str(Path(eq_tui.__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == repr("train --name café".encode())
