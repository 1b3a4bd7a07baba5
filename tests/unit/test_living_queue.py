"""Holds, priorities, edit, clone, add, reload and command ids on an in-memory host: what each
does to the ledger, the state file and events.jsonl, and what survives a restart."""

from __future__ import annotations

import json
from pathlib import Path

from eq_tui.api.model import JobStatus
from eq_tui.engine.engine import Engine
from tests.integration.test_ledger import started
from tests.support.memory_host import MemoryHost


def events(tmp_path: Path, kind: str) -> list[dict[str, object]]:
    lines = (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["type"] == kind]


async def restart(tmp_path: Path, engine: Engine, ids: list[str]) -> tuple[Engine, MemoryHost]:
    engine.persistence.persist(whole=True)
    engine.ctx.run_dir.release_lock()
    return await started(tmp_path, ids)


async def test_a_held_job_never_launches_until_released_and_the_hold_survives_a_restart(
        tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a", "b", "c"])
    result = await engine.command("hold", ["a", "nope"])
    assert result["results"] == {"a": "ok", "nope": "no such job"}
    await engine.tick()
    assert engine.jobs["a"].status == JobStatus.HELD
    assert {r.job_id for r in host.launches} == {"b", "c"}
    for job_id in ("b", "c"):
        host.finish(job_id, 0)
    await engine.tick()
    assert not engine.finished  # a held job keeps the queue from finishing
    assert (await engine.command("hold", ["b"]))["results"] == {"b": "already completed"}
    engine, host = await restart(tmp_path, engine, ["a", "b", "c"])
    assert engine.jobs["a"].status == JobStatus.HELD
    await engine.tick()
    assert host.launches == []
    assert (await engine.command("release", ["a", "b"]))["results"] == {
        "a": "ok", "b": "not held (completed)"}
    await engine.tick()
    assert [r.job_id for r in host.launches] == ["a"]
    engine.ctx.run_dir.release_lock()


async def test_priority_orders_waiting_jobs_and_a_persons_priority_survives_a_restart(
        tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a", "b", "c", "d"])
    assert (await engine.command("priority", ["d"], {"priority": 5}))["ok"]
    assert (await engine.command("priority", ["c"], {"delta": 1}))["ok"]
    bad = await engine.command("priority", ["c"], {"priority": "high"})
    assert not bad["ok"] and "whole number" in str(bad["error"])
    await engine.tick()
    assert [r.job_id for r in host.launches] == ["d", "c"]  # two GPUs: the two highest
    engine, host = await restart(tmp_path, engine, ["a", "b", "c", "d"])
    assert (engine.jobs["d"].priority, engine.jobs["d"].priority_set) == (5, True)
    engine.ctx.run_dir.release_lock()


async def test_edit_a_pending_job_and_a_finished_one_which_is_requeued_with_a_fresh_count(
        tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a", "b", "c"])
    await engine.command("hold", ["c"])
    await engine.tick()
    refused = await engine.command("edit", ["a"], {"cmd": "train a --lr 1"})
    assert refused["results"] == {"a": "running: kill or requeue it first, or clone it"}
    host.finish("a", 1, log="ValueError: nan")
    await engine.tick()
    assert engine.jobs["a"].status == JobStatus.STUCK
    done = await engine.command("edit", ["a", "c"], {"add_flag": {"lr": "0.5"}, "by": "test"})
    assert done["ok"], done
    a, c = engine.jobs["a"], engine.jobs["c"]
    assert (a.cmd, a.status, a.attempts, a.failure) == ("train a --lr 0.5", JobStatus.PENDING,
                                                        0, None)
    assert len(a.history) == 1 and a.edits[-1]["old"] == "train a" and a.edits[-1]["requeued"]
    assert (c.cmd, c.status) == ("train c --lr 0.5", JobStatus.HELD)
    edited = events(tmp_path, "job_edited")
    assert [(e["job"], e["new_cmd"], e["by"]) for e in edited] == [
        ("a", "train a --lr 0.5", "test"), ("c", "train c --lr 0.5", "test")]
    await engine.tick()
    launched = [r for r in host.launches if r.job_id == "a"]
    assert [(r.attempt, r.cmd) for r in launched] == [(1, "train a"), (2, "train a --lr 0.5")]
    # an edited command stays through a restart with the original manifest
    engine, host = await restart(tmp_path, engine, ["a", "b", "c"])
    assert engine.jobs["c"].cmd == "train c --lr 0.5"
    engine.ctx.run_dir.release_lock()


async def test_clone_and_add_make_jobs_that_survive_a_restart_with_the_original_manifest(
        tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a"])
    await engine.tick()
    clone = await engine.command("clone", ["a"], {"add_flag": {"seed": "2"}})
    assert clone["ok"] and clone["detail"]["job"] == "a-clone1"
    added = await engine.command("add", [], {"id": "x", "cmd": "train x", "priority": 3})
    assert added["ok"], added
    for bad_args, why in (({"id": "x", "cmd": "t"}, "exists already"),
                          ({"id": "a b", "cmd": "t"}, "may only use"),
                          ({"id": "y", "cmd": " "}, "empty"),
                          ({"id": "y", "cmd": "t", "phase": "nope"}, "no phase")):
        refused = await engine.command("add", [], bad_args)
        assert not refused["ok"] and why in str(refused["error"]), refused
    await engine.tick()
    assert [(r.job_id, r.cmd) for r in host.launches] == [
        ("a", "train a"), ("x", "train x")]  # one GPU left: the higher priority first
    assert [e["job"] for e in events(tmp_path, "job_added")] == ["a-clone1", "x"]
    engine, host = await restart(tmp_path, engine, ["a"])
    assert list(engine.jobs) == ["a", "a-clone1", "x"]
    assert engine.jobs["a-clone1"].cmd == "train a --seed 2"
    assert engine.jobs["a-clone1"].origin == "clone" and engine.jobs["x"].origin == "added"
    assert engine.ctx.ledger.specs["x"].cmd == "train x"
    engine.ctx.run_dir.release_lock()


async def test_a_command_id_sent_again_is_applied_once_also_after_a_restart(
        tmp_path: Path) -> None:
    engine, _host = await started(tmp_path, ["a"])
    first = await engine.command("clone", ["a"], {}, "cmd-1")
    again = await engine.command("clone", ["a"], {}, "cmd-1")
    assert first["detail"]["job"] == "a-clone1" and again["duplicate"]
    assert again["detail"] == first["detail"]
    assert list(engine.jobs) == ["a", "a-clone1"]
    engine, _host = await restart(tmp_path, engine, ["a"])
    third = await engine.command("clone", ["a"], {}, "cmd-1")
    assert third["duplicate"] and list(engine.jobs) == ["a", "a-clone1"]
    assert (await engine.command("clone", ["a"], {}, "cmd-2"))["detail"]["job"] == "a-clone2"
    engine.ctx.run_dir.release_lock()


async def test_reload_adds_updates_and_retires_waiting_jobs_only(tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["run", "done", "wait", "gone", "gone-run"])
    await engine.command("hold", ["wait", "gone"])
    await engine.tick()  # run and done launch (two GPUs); then gone-run after done ends
    host.finish("done", 0)
    await engine.tick()
    assert engine.jobs["gone-run"].status == JobStatus.RUNNING
    source = Path(engine.manifest.source)
    source.write_text("""
project: p
hosts: [{name: m}]
jobs:
  - {id: run, cmd: train run --changed}
  - {id: done, cmd: train done --changed}
  - {id: wait, cmd: train wait --changed, priority: 2}
  - {id: new, cmd: train new}
""")
    dry = await engine.command("reload", [], {"dry_run": True})
    plan = dry["detail"]
    assert (plan["add"], plan["update"], plan["retire"]) == (["new"], ["wait"], [])
    assert set(plan["kept"]) == {"run", "done", "gone-run"}
    # a person held `gone`: the file dropping it does not retire it (only --force does)
    assert plan["by_person"] == {"gone": "its retirement (a person held it)"}
    assert "new" not in engine.jobs and engine.jobs["wait"].cmd == "train wait"
    done = await engine.command("reload", [], {"by": "test"})
    assert done["ok"], done
    assert list(engine.jobs) == ["run", "done", "wait", "gone", "gone-run", "new"]
    assert engine.jobs["run"].cmd == "train run" and engine.jobs["done"].cmd == "train done"
    assert (engine.jobs["wait"].cmd, engine.jobs["wait"].priority) == ("train wait --changed", 2)
    assert engine.jobs["wait"].status == JobStatus.HELD  # updated, and still held
    assert engine.ctx.ledger.retired == []
    forced = await engine.command("reload", [], {"by": "test", "force": True})
    assert forced["detail"]["retire"] == ["gone"] and not forced["detail"]["by_person"]
    assert [r["id"] for r in engine.ctx.ledger.retired] == ["gone"]
    state = json.loads((tmp_path / "run" / "queue_state.json").read_text())
    assert "gone" not in {j["id"] for j in state["jobs"]}
    assert [e["job"] for e in events(tmp_path, "job_retired")] == ["gone"]
    engine.ctx.run_dir.release_lock()


def test_manifest_priority_top_phase_template_job(tmp_path: Path) -> None:
    from eq_tui.manifest.loader import load_manifest

    path = tmp_path / "m.yaml"
    path.write_text("""
project: p
hosts: [{name: m}]
priority: 1
phases:
  - name: one
    priority: 4
    jobs: [{id: a, cmd: x}, {id: b, cmd: y, priority: -2}]
  - name: two
    grid: {s: [1]}
    template: {id: "g${s}", cmd: x, priority: 9}
  - name: three
    jobs: [{id: c, cmd: x}]
""")
    manifest = load_manifest(str(path))
    assert {s.id: s.priority for s in manifest.jobs} == {"a": 4, "b": -2, "g1": 9, "c": 1}


async def test_jobs_made_and_edits_after_the_state_copy_a_restart_falls_back_to_survive(
        tmp_path: Path) -> None:
    engine, _host = await started(tmp_path, ["a", "b"])
    await engine.command("hold", ["b"])
    engine.persistence.persist(whole=True)
    state = tmp_path / "run" / "queue_state.json"
    older = state.read_text()
    await engine.command("clone", ["a"], {"id": "a2", "add_flag": {"seed": "3"}})
    await engine.command("edit", ["b"], {"cmd": "train b --fixed"})
    engine.persistence.persist(whole=True)
    engine.ctx.run_dir.release_lock()
    state.write_text(older)  # as if the newer state file were lost
    engine, _host = await started(tmp_path, ["a", "b"])
    assert engine.jobs["a2"].cmd == "train a --seed 3"
    assert engine.jobs["a2"].origin == "clone" and "a2" in engine.ctx.ledger.specs
    assert engine.jobs["b"].cmd == "train b --fixed"
    engine.ctx.run_dir.release_lock()


def test_set_arg_changes_one_arg_and_leaves_the_rest_of_the_text() -> None:
    import pytest

    from eq_tui.api.command_args import ArgError, parse_sets, set_arg

    assert set_arg("python t.py --lr 0.1 --seed 3", "lr", "0.2") == "python t.py --lr 0.2 --seed 3"
    assert set_arg("python t.py --lr=0.1", "lr", "0.2") == "python t.py --lr 0.2"
    assert set_arg("python t.py --ids 1 2 --x", "ids", "a b") == "python t.py --ids 'a b' --x"
    assert set_arg("python t.py --off -1 --x", "off", "2") == "python t.py --off 2 --x"
    assert set_arg("python t.py --fast --x", "fast", "false") == "python t.py --x"
    assert set_arg("python t.py", "fast", "true") == "python t.py --fast"
    assert set_arg("python t.py --a 1 > out.log 2>&1", "b", "x y") == \
        "python t.py --a 1 --b 'x y' > out.log 2>&1"
    assert set_arg("python t.py | tee log", "b", "1") == "python t.py --b 1 | tee log"
    assert set_arg("python t.py --name 'a b' --x", "name", "c") == "python t.py --name c --x"
    assert parse_sets(["lr=0.1", "--fast", "msg=a=b"]) == {"lr": "0.1", "fast": "true",
                                                           "msg": "a=b"}
    with pytest.raises(ArgError):
        parse_sets(["bad key=1"])


def test_shell_verbs_parse_and_refuse_bad_usage() -> None:
    import pytest

    from eq_tui.api.commands import Add, Clone, Edit, Kill, Reload, SetPriority
    from eq_tui.cli.queue_verbs import parse_verb
    from eq_tui.errors import UsageError

    edit = parse_verb("edit", ["run", "a", "b", "--", "python", "t.py", "--lr", "1e-3"])
    assert edit.command == Edit(("a", "b"), cmd="python t.py --lr 1e-3")
    assert edit.jobs == ["a", "b"]
    assert edit.command.wire() == ("edit", ["a", "b"], {"cmd": "python t.py --lr 1e-3"})
    shell = parse_verb("edit", ["run", "a", "--", "python t.py | tee x"])
    assert shell.command == Edit(("a",), cmd="python t.py | tee x")  # one word: as it is
    quoted = parse_verb("add", ["run", "--id", "x", "--", "echo", "a b"])
    assert quoted.command == Add(id="x", cmd="echo 'a b'")
    assert parse_verb("priority", ["run", "a", "b", "-3"]).command == SetPriority(
        ("a", "b"), priority=-3)
    kill = parse_verb("kill", ["run", "--filter", "status:stuck"])
    assert (kill.command, kill.filter) == (Kill(()), "status:stuck")
    assert parse_verb("reload", ["h:/r", "--dry-run"]).command == Reload(dry_run=True)
    assert parse_verb("clone", ["run", "a", "--id", "b", "--set", "lr=3"]).command == Clone(
        job="a", new_id="b", sets={"lr": "3"})
    for verb, argv in (("kill", ["run"]), ("kill", ["run", "a;b"]), ("edit", ["run", "a"]),
                       ("add", ["run", "--id", "x"]), ("add", ["run", "--id", "a b", "--", "x"]),
                       ("pause", ["run", "--", "x"]), ("priority", ["run", "a", "high"]),
                       ("clone", ["run", "a", "--set", "-x=1"]), ("edit", ["run", "a", "--", " "])):
        with pytest.raises(UsageError):
            parse_verb(verb, argv)


def test_what_a_command_id_keeps_is_bounded() -> None:
    from eq_tui.engine.state.command_log import KEEP, KEEP_RESULTS, CommandLog

    log = CommandLog()
    for n in range(KEEP + 5):
        log.remember(f"c{n}", {"ok": True, "results": {f"j{i}": "ok" for i in range(300)},
                               "error": None, "detail": {"plan": ["x" * 50] * 200}})
    kept = log.to_json()
    assert len(kept) == KEEP and kept[0][0] == "c5"
    assert len(kept[-1][1]["results"]) == KEEP_RESULTS and kept[-1][1]["detail"] == {
        "trimmed": True}
    again = CommandLog()
    again.restore(kept)
    assert again.to_json() == kept


def test_the_uis_reload_question_names_what_a_persons_changes_keep_from_the_file() -> None:
    from eq_tui.tui.living import reload_message

    text = reload_message({"add": [], "update": ["j1"], "retire": [], "kept": {},
                           "not_applied": [], "by_person": {
                               "j3": "its command `t --lr 1` (a person's edit `t` stays)"}})
    assert text.splitlines() == [
        "update: j1",
        "not applied to j3, a person changed it: its command `t --lr 1` (a person's edit `t` "
        "stays)", "(`eq-tui reload RUN_DIR --force` applies the file's over them)"]
