"""`edit --set` and `clone --set` change a flag the command has, and only that: a flag it
lacks is refused with the flags it has and the nearest (a typo would add a flag its script does
not take, and cost a run); `--add-flag` adds one on purpose. `retry --stuck [--phase P]` names
every stuck job (of P): the crash guard's advice. An engine on an in-memory host."""

from __future__ import annotations

from pathlib import Path

import pytest

from eq_tui.api.command_args import flags, unknown_flag
from eq_tui.api.commands import Clone, Edit, Retry, from_wire
from eq_tui.api.model import JobStatus
from eq_tui.cli.queue_check import check_request
from eq_tui.cli.queue_verbs import parse_verb
from eq_tui.errors import UsageError
from tests.integration.test_ledger import started


def test_the_flags_of_a_command_are_its_own_words_before_any_shell_operator() -> None:
    assert flags("python t.py --lr 0.1 --seed=3 -v --fast --lr 2 | tee --log x") == [
        "lr", "seed", "fast"]
    assert flags("python t.py > out --quiet") == []
    assert flags("train -- --x '--quoted'") == ["x"]  # as --set finds them: not quoted ones


def test_a_set_flag_the_command_lacks_says_what_it_has_and_how_to_add_it() -> None:
    cmd = "python t.py --lr 0.1 --seed 1"
    assert unknown_flag(cmd, {"lr": "0.5", "seed": "false"}) is None
    assert unknown_flag(cmd, {"lr": "1", "sed": "3"}) == (
        "the command has no --sed (its flags: --lr, --seed); did you mean --seed? "
        "(--add-flag sed=3 adds it as a new flag)")
    assert unknown_flag("python t.py", {"x": "a b"}) == (
        "the command has no --x (its flags: none) (--add-flag 'x=a b' adds it as a new flag)")


def test_the_shell_forms_of_set_add_flag_and_retry_stuck() -> None:
    edit = parse_verb("edit", ["run", "a", "--set", "lr=1", "--add-flag", "wd=0.1"])
    assert edit.command == Edit(("a",), sets={"lr": "1"}, add_flags={"wd": "0.1"})
    assert parse_verb("edit", ["run", "a", "--add-flag", "fast"]).command == Edit(
        ("a",), add_flags={"fast": "true"})
    assert parse_verb("clone", ["run", "a", "--add-flag", "wd=1"]).command == Clone(
        job="a", add_flags={"wd": "1"})
    assert Edit(("a",), add_flags={"wd": "1"}).wire() == ("edit", ["a"], {"add_flag": {"wd": "1"}})
    assert from_wire("clone", ["a"], {"add_flag": {"wd": "1"}}) == Clone(job="a",
                                                                       add_flags={"wd": "1"})
    stuck = parse_verb("retry", ["run", "--stuck"])
    assert (stuck.command, stuck.filter) == (Retry(()), "status:stuck")
    assert parse_verb("retry", ["run", "--stuck", "--phase", "p"]).filter == \
        "status:stuck phase:p"
    for argv, why in ((["run", "a", "--set", "lr=1", "--add-flag", "lr=2"], "both"),
                      (["run", "a", "--add-flag=-x"], "--add-flag '-x'")):
        with pytest.raises(UsageError, match=why):
            parse_verb("edit", argv)
    for argv, why in ((["run", "--phase", "p"], "--phase goes with --stuck"),
                      (["run", "a", "--stuck"], "give no JOB"),
                      (["run", "--stuck", "--filter", "x"], "give no JOB"),
                      (["run", "--stuck", "--phase", "a b"], "not a phase name")):
        with pytest.raises(UsageError, match=why):
            parse_verb("retry", argv)


def test_a_request_is_checked_against_the_runs_jobs() -> None:
    jobs = [{"id": "lr0.1_seed1", "cmd": "t --lr 0.1 --seed 1"}, {"id": "b", "cmd": "t"}]
    check_request(parse_verb("edit", ["run", "b", "--add-flag", "x=1"]), jobs)
    check_request(parse_verb("edit", ["run", "b", "--set", "x=1", "--", "t --x 2"]), jobs)
    with pytest.raises(UsageError, match=r"kill: no job 'lr0.1_sed1' in run — did you mean "
                                         r"'lr0.1_seed1'\? \(`eq-tui status run --jobs` lists "
                                         r"its 2 jobs\)"):
        check_request(parse_verb("kill", ["run", "lr0.1_sed1"]), jobs)
    with pytest.raises(UsageError, match=r"no job 'a' in run \(it has no jobs\)"):
        check_request(parse_verb("kill", ["run", "a"]), [])
    with pytest.raises(UsageError, match=r"^clone lr0.1_seed1: the command has no --sed .* "
                                         r"nothing was changed$"):
        check_request(parse_verb("clone", ["run", "lr0.1_seed1", "--set", "sed=2"]), jobs)


async def test_the_engine_refuses_a_set_flag_the_command_lacks_and_runs_nothing_again(
        tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a"])
    await engine.tick()
    host.finish("a", 0)
    await engine.tick()
    assert engine.jobs["a"].status == JobStatus.COMPLETED
    for name, ids, args in (("edit", ["a"], {"set": {"nosuchflag": "3"}}),
                            ("clone", ["a"], {"set": {"nosuchflag": "3"}})):
        answer = await engine.command(name, ids, args)
        assert not answer["ok"]
        assert "the command has no --nosuchflag (its flags: none)" in str(answer)
    assert engine.jobs["a"].status == JobStatus.COMPLETED and list(engine.jobs) == ["a"]
    added = await engine.command("edit", ["a"], {"add_flag": {"nosuchflag": "3"}})
    assert added["ok"] and engine.jobs["a"].cmd == "train a --nosuchflag 3"
    assert engine.jobs["a"].status == JobStatus.PENDING  # run again, on purpose
    engine.ctx.run_dir.release_lock()
