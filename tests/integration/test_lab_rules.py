"""Lab rules on a host (hosts/lab_rules.py): what a rules file says, how an engine keeps it (the
GPUs it leaves alone, the order it takes GPUs in, why a job waits on a rule), and a file that
is not rules: a clear warning, and the engine runs as if there were none."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from eq_tui.engine.decide.lab_rules import with_rules
from eq_tui.engine.decide.placement import GpuView, HostView, no_room
from eq_tui.hosts.base import HostSnapshot
from eq_tui.hosts.claim_types import GpuClaim
from eq_tui.hosts.factory import sim_state_dir
from eq_tui.hosts.lab_rules import (
    HostLab,
    LabRules,
    RulesError,
    Window,
    closed_gpus,
    parse_lab,
    parse_rules,
    user_cap,
)
from eq_tui.sim.state import init_sim_state
from tests.support.engine_run import job, make_manifest, sim_hosts, start_engine

RULES = """\
keep_free: [{gpus: [7], why: "for the demo"}]
reserve:
  - {gpus: [0, 1], for: [alice]}
max_gpus_per_user: 2
interactive:
  - {gpus: [6], hours: "09:00-19:00", days: [mon, tue, wed, thu, fri]}
  - {gpus: [5], hours: "22:00-06:00", days: [fri]}
prefer: [3, 2]
"""


def test_a_rules_file_reads_as_rules() -> None:
    rules = parse_rules(RULES)
    assert rules.keep_free == {7: "for the demo"}
    assert rules.reserved == {0: frozenset({"alice"}), 1: frozenset({"alice"})}
    assert rules.max_gpus_per_user == 2 and rules.prefer == (3, 2)
    assert rules.interactive[0] == Window(frozenset({6}), 540, 1140, frozenset({1, 2, 3, 4, 5}),
                                          "09:00-19:00")
    assert parse_rules("keep_free: [3, 4]").keep_free == {3: "", 4: ""}
    assert parse_rules("") == LabRules()


@pytest.mark.parametrize(("text", "says"), [
    ("keep_free: [7", "line 1"),
    ("- 1\n- 2", "not a mapping"),
    ("keepfree: [1]", "unknown rule 'keepfree'"),
    ("max_gpus_per_user: 0", "max_gpus_per_user"),
    ("interactive: [{gpus: [1], hours: '9-5'}]", "interactive[0].hours"),
    ("interactive: [{gpus: [1], hours: '09:00-17:00', days: [someday]}]", "days"),
    ("reserve: [{gpus: [1]}]", "reserve[0].for"),
    ("reserve: [{gpus: one, for: [a]}]", "reserve[0].gpus"),
    ("prefer: [1, 1]", "each GPU once"),
])
def test_what_is_not_a_rule_says_where(text: str, says: str) -> None:
    with pytest.raises(RulesError, match=re.escape(says)):
        parse_rules(text)
    lab = parse_lab(text.splitlines(), path="/etc/eq-tui/rules.yaml", user="me", clock=None,
                    waiting=())
    assert lab.rules is None
    assert lab.warning.startswith("lab rules /etc/eq-tui/rules.yaml ignored, none apply until "
                                  "it is fixed: ")


def test_what_the_rules_keep_from_us_and_when() -> None:
    rules = parse_rules(RULES)
    tuesday_noon = HostLab(rules, user="bob", clock=(12 * 60, 2))
    assert closed_gpus(tuesday_noon, "box1") == {
        7: "box1 keeps GPU 7 free (for the demo)",
        0: "box1 reserves GPU 0 for alice", 1: "box1 reserves GPU 1 for alice",
        6: "box1 keeps GPU 6 free for interactive use (09:00-19:00)"}
    alice_at_night = HostLab(rules, user="alice", clock=(20 * 60, 2))
    assert closed_gpus(alice_at_night, "box1") == {7: "box1 keeps GPU 7 free (for the demo)"}
    # a window past midnight: Friday night, and the small hours of Saturday
    friday_late, saturday_early = (23 * 60, 5), (5 * 60, 6)
    for clock in (friday_late, saturday_early):
        assert 5 in closed_gpus(HostLab(rules, user="alice", clock=clock), "b")
    assert 5 not in closed_gpus(HostLab(rules, user="alice", clock=(5 * 60, 5)), "b")
    # the per-user limit holds only while another user waits
    waiting = HostLab(rules, user="bob", waiting=frozenset({"carol"}))
    assert user_cap(waiting, "box1", [2, 3]) == (
        "box1 allows 2 GPU(s) per user while others wait (carol); bob hold 2")
    assert user_cap(waiting, "box1", [2]) is None
    assert user_cap(HostLab(rules, user="bob"), "box1", [2, 3, 4]) is None


def test_placement_keeps_the_rules_and_says_which_one_a_job_waits_on() -> None:
    gpus = tuple(GpuView(i, 0, 24000, 0) for i in range(4))
    view = HostView("box1", True, gpus, None, 8)
    rules = parse_rules("keep_free: [{gpus: [1], why: interactive use}]\nprefer: [3, 2]\n"
                        "max_gpus_per_user: 1\nreserve: [{gpus: [0], for: [me]}]")
    snap = HostSnapshot("box1", True, 0.0, lab=HostLab(rules, user="me"))
    kept = with_rules(view, snap)
    assert kept.allowed == frozenset({0, 2, 3})
    assert [g.index for g in kept.gpus] == [3, 2, 0, 1]
    assert kept.notes == ("box1 keeps GPU 1 free (interactive use)",)
    # at the limit, while someone else waits: only what we hold already (to share it)
    mine = GpuClaim("c.2", 2, "me", "p", "t", "j", 1, 10, None, "s")
    crowded = HostSnapshot("box1", True, 0.0, claims=(mine,),
                           lab=HostLab(rules, user="me", waiting=frozenset({"you"})))
    capped = with_rules(view, crowded)
    assert capped.allowed == frozenset({2})
    busy = (GpuView(2, 9000, 24000, 0),)
    reason = no_room([HostView("box1", True, busy, capped.allowed, 8, notes=capped.notes)],
                     {}, {})
    assert reason == ("no free GPU (1 of 1 busy); box1 keeps GPU 1 free (interactive use); "
                      "box1 allows 1 GPU(s) per user while others wait (you); me hold 1")
    assert with_rules(view, HostSnapshot("box1", True, 0.0)) is view


async def engine_on(tmp_path: Path, rules: str | None, jobs: int = 2,
                    cmd: str = "sleep 30"):  # type: ignore[no-untyped-def]
    run_dir = tmp_path / "run"
    state = sim_state_dir(run_dir, "sim")
    init_sim_state(state, host="sim", gpus=2, memory_mib=24576)
    if rules is not None:
        (state / "rules.yaml").write_text(rules)
    manifest = make_manifest(tmp_path, [job(f"j{i}", cmd) for i in range(jobs)],
                             hosts=sim_hosts(("sim", 2)))
    return await start_engine(manifest, run_dir, poll=0.2, exit_when_done=False), state


@pytest.mark.integration
async def test_an_engine_keeps_the_hosts_rules_and_says_why_a_job_waits(tmp_path: Path) -> None:
    run, _state = await engine_on(
        tmp_path, "interactive: [{gpus: [0], hours: '00:00-24:00'}]\nprefer: [1, 0]\n")
    try:
        await run.wait_for(lambda: run.status("j0") == "running")
        await run.ticks_pass(3)
        assert run.engine.jobs["j0"].gpus == [1]
        assert run.status("j1") == "pending"
        snap = run.engine.snapshot()
        assert "sim keeps GPU 0 free for interactive use (00:00-24:00)" in (
            snap["waiting_reason"] + str(run.engine.jobs["j1"].reason))
        [sim] = snap["hosts"]
        gpu0 = next(g for g in sim["gpus"] if g["index"] == 0)
        assert gpu0["rule"] == "sim keeps GPU 0 free for interactive use (00:00-24:00)"
    finally:
        for job_id in ("j0", "j1"):
            await run.engine.command("kill", [job_id])
        await run.stop()


@pytest.mark.integration
async def test_a_malformed_rules_file_warns_and_the_engine_runs_as_without(
        tmp_path: Path) -> None:
    run, _state = await engine_on(tmp_path, "keep_free: [0\nmax_gpus_per_user: many\n",
                                  cmd="fake-train --epochs 1 --epoch-seconds 0.1 --mem 100")
    try:
        await run.wait_for(lambda: all(run.status(j) == "completed" for j in ("j0", "j1")))
        alerts = [e for e in run.events if e.type == "alert"]
        assert any("rules.yaml ignored, none apply until it is fixed: line" in e.message
                   for e in alerts), alerts
        assert sorted(g for j in ("j0", "j1") for g in run.engine.jobs[j].history[0].gpus) \
            == [0, 1]
    finally:
        await run.stop()


@pytest.mark.integration
async def test_at_most_n_gpus_per_user_while_another_user_waits(tmp_path: Path) -> None:
    run, state = await engine_on(tmp_path, "max_gpus_per_user: 1\n")
    claims = state / "claims"
    claims.mkdir(mode=0o1777, exist_ok=True)
    want = claims / "w.someone.q.beef01"
    want.write_text("eqwant1 someone q beef01 1 all\n")
    statuses = lambda: sorted(run.status(j) for j in ("j0", "j1"))  # noqa: E731
    try:
        await run.wait_for(lambda: "running" in statuses())
        await run.ticks_pass(4)
        assert statuses() == ["pending", "running"]
        assert "allows 1 GPU(s) per user while others wait (someone)" in str(
            run.engine.snapshot()["waiting_reason"])
        # they no longer wait (their want is stale): the next GPU is ours again
        past = time.time() - 600
        os.utime(want, (past, past))
        await run.wait_for(lambda: statuses() == ["running", "running"])
    finally:
        for job_id in ("j0", "j1"):
            await run.engine.command("kill", [job_id])
        await run.stop()
