"""The journal's replay rules line by line (journal.py's docstring), on hand-written journals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eq_tui.runfiles.journal import encode_line, replay


def line(gen: Any, fields: Any = None, jobs: Any = None) -> bytes:
    return (json.dumps({"gen": gen, "set": {} if fields is None else fields,
                        "jobs": [] if jobs is None else jobs}) + "\n").encode()


def write(tmp_path: Path, *lines: bytes) -> Path:
    path = tmp_path / "queue_state.journal.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def base(generation: int | None = 3) -> dict[str, Any]:
    state: dict[str, Any] = {"updated": 1.0, "jobs": [{"id": "a", "status": "pending"}]}
    if generation is not None:
        state["generation"] = generation
    return state


def test_lines_of_the_states_generation_replace_jobs_by_id_and_add_new_ones(
        tmp_path: Path) -> None:
    state = base()
    path = write(tmp_path,
                 line(3, {"updated": 2.0}, [{"id": "a", "status": "running"},
                                            {"id": "b", "status": "pending"},
                                            {"id": "c", "status": "pending"}]),
                 b"\n",
                 line(3, {"updated": 3.0, "paused": True}, [{"id": "b", "status": "running"}]))
    result = replay(state, path)
    assert result.applied == 2 and result.newest_generation == 3
    assert state == {"updated": 3.0, "paused": True, "generation": 3,
                     "jobs": [{"id": "a", "status": "running"}, {"id": "b", "status": "running"},
                              {"id": "c", "status": "pending"}]}


def test_a_state_without_a_generation_is_generation_0(tmp_path: Path) -> None:
    state = base(None)
    assert replay(state, write(tmp_path, line(0, {}, [{"id": "a", "status": "done"}]))).applied \
        == 1
    assert state["jobs"] == [{"id": "a", "status": "done"}]


def test_older_lines_are_skipped_and_reading_goes_on(tmp_path: Path) -> None:
    state = base()
    path = write(tmp_path, line(2, {"updated": 9.0}, [{"id": "a", "status": "old"}]),
                 line(3, {}, [{"id": "a", "status": "new"}]))
    result = replay(state, path)
    assert result.applied == 1 and state["updated"] == 1.0
    assert state["jobs"] == [{"id": "a", "status": "new"}]


def test_newer_lines_apply_their_jobs_but_keep_the_copys_time(tmp_path: Path) -> None:
    state = base()
    path = write(tmp_path, line(4, {"updated": 9.0, "paused": True},
                                [{"id": "a", "status": "running"}]))
    result = replay(state, path)
    assert result.applied == 1 and result.newest_generation == 4
    assert state["updated"] == 1.0 and state["paused"] is True and state["generation"] == 3


def test_fields_named_jobs_or_generation_never_overwrite_the_state(tmp_path: Path) -> None:
    state = base()
    replay(state, write(tmp_path, line(3, {"jobs": [], "generation": 99, "x": 1})))
    assert state["jobs"] == [{"id": "a", "status": "pending"}] and state["generation"] == 3
    assert state["x"] == 1


def test_reading_stops_at_the_first_line_that_does_not_parse(tmp_path: Path) -> None:
    good = line(3, {}, [{"id": "a", "status": "ok"}])
    later = line(3, {}, [{"id": "a", "status": "after a bad line"}])
    for bad in (b'{"gen": 3, "set": {}, "jo', b"[1, 2]\n", line("3"), line(3, []),
                line(3, {}, {"id": "a"}), line(3, {}, [{"status": "no id"}]),
                line(3, {}, ["a"]), b"\xff\xfe not utf-8\n"):
        state = base()
        result = replay(state, write(tmp_path, good, bad, later))
        assert result.applied == 1, bad
        assert state["jobs"] == [{"id": "a", "status": "ok"}], bad


def test_no_journal_replays_nothing(tmp_path: Path) -> None:
    state = base()
    result = replay(state, tmp_path / "missing.jsonl")
    assert (result.applied, result.newest_generation) == (0, 0) and state == base()


def test_encode_line_is_what_replay_reads(tmp_path: Path) -> None:
    raw = encode_line(3, {"updated": "5.0"}, [json.dumps({"id": "a", "status": "x"})])
    state = base()
    assert replay(state, write(tmp_path, raw)).applied == 1
    assert state["updated"] == 5.0 and state["jobs"] == [{"id": "a", "status": "x"}]
