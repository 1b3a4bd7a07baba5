"""A living search's rules, on a real RunContext (no host reached): a person's amounts and hold
kept through the state file (engine/state/search_edits.py); why a search asks nothing now and
how many trials it has asked (engine/tick/search_live.py); `edit --search`, `hold --phase` and
`release --phase` as the engine answers them (engine/commands/search_edit.py); what a reload
may change of a search (engine/commands/search_reload.py); and the shell's forms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eq_tui.api.commands import Hold, Release, SetSearch, from_wire
from eq_tui.api.model import JobState
from eq_tui.cli.queue_verbs import parse_verb
from eq_tui.engine.commands.search_edit import (
    amounts_text,
    fewer_than_asked,
    hold_search,
    hours_value,
    release_search,
    search_phase,
    set_search,
    trials_value,
)
from eq_tui.engine.commands.search_reload import amount_changes, search_refusal, without_amounts
from eq_tui.engine.context import RunContext
from eq_tui.engine.state.search_edits import SearchEdits, with_amounts
from eq_tui.engine.tick.search_live import asks_nothing, trials_asked
from eq_tui.errors import UsageError
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import Manifest
from tests.support.context_bed import context

FLAT = """
project: p
goal: {{val_acc: max}}
hosts: [{{name: g1}}]
search:
  space: {{lr: {space}}}
  {amounts}
  sampler: {sampler}
  seed: {seed}
{grid}template: {{cmd: "train --lr ${{lr}}{seed_arg}"}}
"""
PHASED = """
project: p
goal: {val_acc: max}
hosts: [{name: g1}]
phases:
  - name: prep
    jobs: [{id: prep1, cmd: prep}]
  - name: tune
    search: {space: {lr: {low: 0.1, high: 0.9}}, trials: 4}
    template: {cmd: "train --lr ${lr}"}
  - name: wide
    search: {space: {lr: {low: 0.1, high: 0.9}}, budget: {gpu_hours: 2}, sampler: SAMPLER}
    template: {cmd: "wide --lr ${lr}"}
"""


def flat(*, space: str = "{low: 0.001, high: 0.1, log: true}", amounts: str = "trials: 5",
         sampler: str = "random", seed: int = 0, grid: str = "") -> Manifest:
    return load_manifest_text(FLAT.format(
        space=space, amounts=amounts, sampler=sampler, seed=seed, grid=grid,
        seed_arg=" --seed ${seed}" if grid else ""), "m.yaml")


def phased(sampler: str = "tpe") -> Manifest:
    return load_manifest_text(PHASED.replace("SAMPLER", sampler), "m.yaml")


def trial(job_id: str, phase: str, number: str, origin: str = "search") -> JobState:
    return JobState(id=job_id, phase=phase, cmd="c", origin=origin, params={"trial": number})


def bed(tmp_path: Path, manifest: Manifest, jobs: list[JobState] | None = None) -> RunContext:
    return context(tmp_path, manifest, jobs=jobs or [])


# ---- engine/state/search_edits.py ----------------------------------------------------------

def test_search_edits_keep_the_files_amounts_and_come_back_from_the_state_file() -> None:
    manifest = phased()
    edits = SearchEdits()
    edited = edits.set(manifest, "tune", (9, 1.5))
    assert edited.phase("tune").search.trials == 9  # type: ignore[union-attr]
    assert edited.phase("tune").search.gpu_hours == 1.5  # type: ignore[union-attr]
    assert edited.phase("wide") == manifest.phase("wide")
    edited = edits.set(edited, "tune", (12, None))  # the file's amounts stay the first ones
    assert edits.amounts == {"tune": ((12, None), (4, None))}
    assert edits.manifests("tune", edited) == (4, None)
    assert edits.manifests("wide", edited) == (None, 2.0)
    assert edits.manifests("prep", edited) is None
    edits.held["wide"] = "hold by me"
    again = SearchEdits()
    again.restore(json.loads(json.dumps(edits.to_json())))
    assert again.amounts == edits.amounts and again.held == {"wide": "hold by me"}
    restarted = again.apply(manifest)
    assert restarted.phase("tune").search.trials == 12  # type: ignore[union-attr]
    assert restarted.phase("wide") == manifest.phase("wide")
    again.forget("tune")
    assert again.amounts == {} and again.apply(manifest) == manifest
    bads: list[object] = [None, [], {"amounts": {"x": "y"}, "held": []},
                          {"amounts": {"x": {"now": {"trials": 2}}}}]
    for bad in bads:
        lost = SearchEdits()
        lost.restore(bad)
        assert lost.amounts == {} and lost.held == {}


def test_a_persons_gpu_hours_and_unset_amounts_come_back_from_the_state_file() -> None:
    """Pins the state file's gpu_hours (written and read under that key, as a number) and that
    an amount left unset (null) or not a number there comes back unset, not as an error."""
    manifest = phased()
    edits = SearchEdits()
    edits.set(manifest, "wide", (None, 3))
    data = json.loads(json.dumps(edits.to_json()))
    assert data["amounts"]["wide"] == {"now": {"trials": None, "gpu_hours": 3},
                                       "manifest": {"trials": None, "gpu_hours": 2.0}}
    again = SearchEdits()
    again.restore(data)
    assert again.amounts == {"wide": ((None, 3.0), (None, 2.0))}
    assert again.apply(manifest).phase("wide").search.gpu_hours == 3.0  # type: ignore[union-attr]
    odd = SearchEdits()
    odd.restore({"amounts": {"tune": {"now": {"trials": "7", "gpu_hours": "2"},
                                      "manifest": {"trials": 4, "gpu_hours": 1.5}}}})
    assert odd.amounts == {"tune": ((None, None), (4, 1.5))}


def test_amounts_go_only_to_the_phase_named_and_only_where_it_searches() -> None:
    manifest = phased()
    assert with_amounts(manifest, "prep", (3, None)) == manifest
    changed = with_amounts(manifest, "wide", (3, None))
    assert changed.phase("wide").search.trials == 3  # type: ignore[union-attr]
    assert changed.phase("wide").search.gpu_hours is None  # type: ignore[union-attr]
    assert changed.phase("tune") == manifest.phase("tune")


# ---- engine/tick/search_live.py ------------------------------------------------------------

def test_a_search_asks_nothing_while_paused_or_its_phase_is_held(tmp_path: Path) -> None:
    ctx = bed(tmp_path, phased())
    assert asks_nothing(ctx, "tune") is None
    ctx.search_edits.held["wide"] = "hold by me"
    assert asks_nothing(ctx, "tune") is None
    assert asks_nothing(ctx, "wide") == "held (hold by me)"
    ctx.crash_guard.held["tune"] = "crashed"
    assert asks_nothing(ctx, "tune") == "the crash guard holds its phase"
    ctx.paused = True
    assert asks_nothing(ctx, "tune") == "launching is paused"


def test_trials_asked_is_one_past_the_highest_trial_number_of_the_phase(tmp_path: Path) -> None:
    jobs = [trial("tune-t0", "tune", "0"), trial("tune-t3", "tune", "3"),
            trial("wide-t7", "wide", "7"), trial("x", "tune", "9", origin="added"),
            trial("y", "tune", "x")]
    ctx = bed(tmp_path, phased(), jobs)
    assert trials_asked(ctx, "tune") == 4
    assert trials_asked(ctx, "wide") == 8
    assert trials_asked(ctx, "prep") == 0
    ctx.ledger.jobs["tune-t0"].params = {}
    assert trials_asked(ctx, "tune") == 4


# ---- engine/commands/search_edit.py --------------------------------------------------------

def test_the_phase_a_search_command_names() -> None:
    assert search_phase(flat(), None) == ("main", None)
    assert search_phase(phased(), None) == (None, "several phases search (tune, wide): name "
                                                  "one with --phase")
    assert search_phase(phased(), "wide") == ("wide", None)
    assert search_phase(phased(), "prep") == (None, "phase prep has no search")
    assert search_phase(phased(), "x") == (None, "no phase 'x' (phases: prep, tune, wide)")
    no_search = load_manifest_text("project: p\nhosts: [{name: g}]\njobs: [{id: a, cmd: a}]\n",
                                   "m.yaml")
    assert search_phase(no_search, None) == (None, "no phase has a search")


@pytest.mark.parametrize(("value", "expected"), [
    (None, (None, None)), (1, (1, None)), ("40", (40, None)), (" 7 ", (7, None)),
    (0, (None, "trials must be a whole number of at least 1, not 0")),
    ("-3", (None, "trials must be a whole number of at least 1, not '-3'")),
    (True, (None, "trials must be a whole number of at least 1, not True")),
    (2.0, (None, "trials must be a whole number of at least 1, not 2.0")),
    ("x", (None, "trials must be a whole number of at least 1, not 'x'")),
])
def test_trials_values(value: object, expected: tuple[object, object]) -> None:
    assert trials_value(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, (None, None)), (2, (2.0, None)), ("0.5", (0.5, None)), (1e-3, (1e-3, None)),
    (0, (None, "gpu_hours must be a number above 0, not 0")),
    (-1, (None, "gpu_hours must be a number above 0, not -1")),
    (True, (None, "gpu_hours must be a number above 0, not True")),
    ("inf", (None, "gpu_hours must be a number above 0, not 'inf'")),
    ("nan", (None, "gpu_hours must be a number above 0, not 'nan'")),
    ("two", (None, "gpu_hours must be a number above 0, not 'two'")),
    ([1], (None, "gpu_hours must be a number above 0, not [1]")),
])
def test_gpu_hours_values(value: object, expected: tuple[object, object]) -> None:
    assert hours_value(value) == expected


def test_fewer_trials_than_asked_and_the_amounts_in_words() -> None:
    assert fewer_than_asked(None, 9) is None
    assert fewer_than_asked(9, 9) is None and fewer_than_asked(10, 9) is None
    assert fewer_than_asked(8, 9) == ("it has asked 9 trials already: trials can be 9 or "
                                      "more, not 8")
    assert amounts_text((4, None)) == "4 trials"
    assert amounts_text((None, 2.5)) == "2.5 GPU-hours"
    assert amounts_text((4, 2.0)) == "4 trials and 2 GPU-hours"
    assert amounts_text((None, None)) == "nothing"


def test_edit_search_sets_the_amounts_for_the_rest_of_the_run(tmp_path: Path) -> None:
    ctx = bed(tmp_path, phased(), [trial("tune-t0", "tune", "0"), trial("tune-t2", "tune", "2")])
    ctx.ledger.unsaved = False
    answer = set_search(ctx, SetSearch(phase="tune", trials=6, by="me"))
    assert answer["ok"] and answer["results"] == {"phase tune": "ok"}
    assert answer["detail"] == {"phase": "tune", "trials": 6, "gpu_hours": None, "asked": 3}
    assert ctx.manifest.phase("tune").search.trials == 6  # type: ignore[union-attr]
    assert ctx.search_edits.amounts == {"tune": ((6, None), (4, None))}
    assert ctx.ledger.unsaved
    assert ctx.bus.alerts[-1]["message"] == ("phase tune: the search now asks up to 6 trials "
                                             "(3 asked so far; edit by me)")
    answer = set_search(ctx, SetSearch(phase="tune", gpu_hours="1.5"))  # trials stay 6
    assert answer["detail"]["trials"] == 6 and answer["detail"]["gpu_hours"] == 1.5
    assert ctx.bus.alerts[-1]["message"].endswith("6 trials and 1.5 GPU-hours (3 asked so "
                                                  "far; edit)")
    answer = set_search(ctx, SetSearch(phase="tune", trials=3))  # as many as asked: no more
    assert answer["ok"]
    answer = set_search(ctx, SetSearch(phase="wide", trials=1))
    assert answer["ok"] and ctx.manifest.phase("wide").search.gpu_hours == 2.0  # type: ignore[union-attr]


@pytest.mark.parametrize(("command", "error"), [
    (SetSearch(phase="tune", trials=2), "search of phase tune: it has asked 3 trials already: "
                                        "trials can be 3 or more, not 2"),
    (SetSearch(phase="tune"), "search: say trials=N and/or gpu_hours=H"),
    (SetSearch(phase="tune", trials=0), "search: trials must be a whole number of at least 1, "
                                        "not 0"),
    (SetSearch(phase="tune", trials=5, gpu_hours=-1), "search: gpu_hours must be a number "
                                                      "above 0, not -1"),
    (SetSearch(trials=5), "search: several phases search (tune, wide): name one with --phase"),
    (SetSearch(phase="prep", trials=5), "search: phase prep has no search"),
])
def test_edit_search_refuses_with_why(tmp_path: Path, command: SetSearch, error: str) -> None:
    ctx = bed(tmp_path, phased(), [trial("tune-t2", "tune", "2")])
    before = ctx.manifest
    answer = set_search(ctx, command)
    assert not answer["ok"] and answer["error"] == error
    assert ctx.manifest is before and ctx.search_edits.amounts == {}


def test_hold_and_release_of_a_search(tmp_path: Path) -> None:
    ctx = bed(tmp_path, phased())
    ctx.ledger.unsaved = False
    assert hold_search(ctx, "prep", "hold") == ("phase prep has no search: hold its jobs by id "
                                                "or with --filter 'phase:prep'")
    assert hold_search(ctx, "x", "hold") == "no phase 'x' (phases: prep, tune, wide)"
    assert not ctx.ledger.unsaved and ctx.search_edits.held == {}
    assert hold_search(ctx, "tune", "hold by me") == "ok"
    assert ctx.search_edits.held == {"tune": "hold by me"} and ctx.ledger.unsaved
    assert ctx.bus.alerts[-1]["message"].startswith("phase tune: its search is held (hold by "
                                                    "me); it asks no new trial")
    assert hold_search(ctx, "tune", "hold") == "already held"
    ctx.ledger.unsaved = False
    assert not release_search(ctx, "wide", "release") and not ctx.ledger.unsaved
    assert release_search(ctx, "tune", "release by me")
    assert ctx.search_edits.held == {} and ctx.ledger.unsaved
    assert ctx.bus.alerts[-1]["message"] == ("phase tune: its search is released (release by "
                                             "me); it asks trials again")
    assert not release_search(ctx, "tune", "release")


def test_edit_hold_and_release_are_told_as_info_in_full(tmp_path: Path) -> None:
    """Pins the alerts a person's hand on a search raises: level info (the TUI and the log
    colour and filter by it, a warning would read as trouble) and the hold's whole sentence."""
    ctx = bed(tmp_path, phased())
    set_search(ctx, SetSearch(phase="tune", trials=6))
    hold_search(ctx, "tune", "hold by me")
    release_search(ctx, "tune", "release by me")
    said = [(a["level"], a["message"]) for a in ctx.bus.alerts]
    assert said == [
        ("info", "phase tune: the search now asks up to 6 trials (0 asked so far; edit)"),
        ("info", "phase tune: its search is held (hold by me); it asks no new trial until "
                 "released, and its trials out run to their end"),
        ("info", "phase tune: its search is released (release by me); it asks trials again")]


# ---- engine/commands/search_reload.py ------------------------------------------------------

@pytest.mark.parametrize(("new", "key"), [
    (flat(space="{low: 0.001, high: 0.2, log: true}"), "search.space"),
    (flat(space="[1, 2]"), "search.space"),
    (flat(sampler="tpe"), "search.sampler"),
    (flat(seed=1), "search.seed"),
])
def test_a_reload_that_changes_what_a_study_began_with_is_refused(new: Manifest,
                                                                  key: str) -> None:
    why = search_refusal(flat(), new)
    assert why is not None and why.startswith(f"{key} changed (phase main's search): a search "
                                              "keeps the ")
    assert "write the new search in a new phase" in why


def test_a_reload_names_the_phase_key_and_leaves_amounts_and_new_searches_alone() -> None:
    why = search_refusal(phased(), phased(sampler="random"))
    assert why is not None and why.startswith("phases[2].search.sampler changed (phase wide's")
    grid = "grid: {seed: [1, 2]}\n"
    why = search_refusal(flat(grid=grid), flat(grid="grid: {seed: [1, 3]}\n"))
    assert why is not None and why.startswith("grid changed (phase main's search)")
    assert search_refusal(flat(), flat(amounts="trials: 9\n  budget: {gpu_hours: 1}")) is None
    assert search_refusal(flat(), phased()) is None  # no phase in both has a search
    jobs = load_manifest_text("project: p\nhosts: [{name: g}]\njobs: [{id: a, cmd: a}]\n",
                              "m.yaml")
    assert search_refusal(flat(), jobs) is None and search_refusal(jobs, flat()) is None
    assert search_refusal(phased(), phased()) is None


def test_amount_changes_compare_the_file_before_and_after() -> None:
    new = phased()
    assert amount_changes({"tune": (4, None), "wide": (None, 2.0)}, new) == {}
    assert amount_changes({"tune": (5, None), "wide": (None, 1.0), "gone": (1, None)}, new) == {
        "tune": (4, None), "wide": (None, 2.0)}
    assert amount_changes({}, new) == {}
    tune = new.phase("tune")
    stripped = without_amounts(tune)
    assert stripped.search is not None and (stripped.search.trials,
                                            stripped.search.gpu_hours) == (None, None)
    assert without_amounts(new.phase("prep")) is new.phase("prep")
    assert without_amounts(flat(amounts="trials: 9").phases[0]) == without_amounts(
        flat().phases[0])


# ---- the shell ------------------------------------------------------------------------------

def test_the_shell_forms_of_edit_search_hold_and_release() -> None:
    request = parse_verb("edit", ["run", "--search", "trials=40", "--phase", "tune"])
    assert request.command == SetSearch(phase="tune", trials=40)
    request = parse_verb("edit", ["run", "--search", "trials=4, budget.gpu_hours=1.5"])
    assert request.command == SetSearch(trials=4, gpu_hours=1.5)
    assert parse_verb("edit", ["run", "--search", "gpu_hours=2"]).command == SetSearch(
        gpu_hours=2.0)
    assert parse_verb("hold", ["run", "--phase", "tune"]).command == Hold(phase="tune")
    assert parse_verb("release", ["run", "--phase", "tune"]).command == Release(phase="tune")
    for command in (SetSearch(phase="tune", trials=40, gpu_hours=1.5, by="me"),
                    Hold(phase="tune"), Hold(("a",))):
        assert from_wire(*command.wire()) == command


@pytest.mark.parametrize(("argv", "why"), [
    (["edit", "run", "--search", "trials=0"], "--search trials must be a whole number of at "
                                              "least 1, not '0'"),
    (["edit", "run", "--search", "trials=x"], "not 'x'"),
    (["edit", "run", "--search", "gpu_hours=0"], "--search gpu_hours must be a number above "
                                                 "0, not '0'"),
    (["edit", "run", "--search", "gpu_hours=inf"], "not 'inf'"),
    (["edit", "run", "--search", "seed=3"], "--search takes trials=N and/or gpu_hours=H "
                                            "(comma-separated), not 'seed=3'"),
    (["edit", "run", "--search", "trials"], "not 'trials'"),
    (["edit", "run", "a", "--search", "trials=3"], "--search changes a phase's search; name no "
                                                   "JOB"),
    (["edit", "run", "--search", "trials=3", "--early-stop", "off"], "no JOB, --filter, --set, "
                                                                     "--early-stop"),
    (["hold", "run", "a", "--phase", "tune"], "hold: --phase holds a phase; name no JOB"),
])
def test_the_shell_refuses_bad_search_forms(argv: list[str], why: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_verb(argv[0], argv[1:])
    assert why in str(caught.value)


async def test_a_reload_applies_the_files_trials_unless_a_person_set_them(
        tmp_path: Path) -> None:
    from eq_tui.engine.commands.reload import reload_manifest
    from eq_tui.manifest import load_manifest

    path = tmp_path / "m.yaml"

    def write(trials: int, space: str = "{low: 0.001, high: 0.1, log: true}") -> None:
        path.write_text(FLAT.format(space=space, amounts=f"trials: {trials}", sampler="random",
                                    seed=0, grid="", seed_arg=""))

    write(5)
    ctx = bed(tmp_path, load_manifest(str(path)))
    write(7)
    answer = await reload_manifest(ctx, by="me", dry_run=True)
    assert answer["detail"]["search"] == {"main": "7 trials"}
    assert ctx.manifest.phase("main").search.trials == 5  # type: ignore[union-attr]
    answer = await reload_manifest(ctx, by="me", dry_run=False)
    assert answer["detail"]["search"] == {"main": "7 trials"}
    assert "phases" not in answer["detail"]["not_applied"]
    assert ctx.manifest.phase("main").search.trials == 7  # type: ignore[union-attr]
    assert ctx.bus.alerts[-1]["message"] == ("phase main: the search now asks up to 7 trials "
                                             "(reload by me)")
    answer = await reload_manifest(ctx, by="me", dry_run=False)  # nothing changed since
    assert answer["detail"]["search"] == {} and answer["detail"]["search_kept"] == {}
    assert set_search(ctx, SetSearch(trials=9))["ok"]
    write(8)
    answer = await reload_manifest(ctx, by="me", dry_run=False)
    assert answer["detail"]["search_kept"] == {"main": "8 trials"}
    assert answer["detail"]["search"] == {}
    assert ctx.manifest.phase("main").search.trials == 9  # type: ignore[union-attr]
    answer = await reload_manifest(ctx, by="me", dry_run=False, force=True)
    assert answer["detail"]["search"] == {"main": "8 trials"}
    assert ctx.manifest.phase("main").search.trials == 8  # type: ignore[union-attr]
    assert ctx.search_edits.amounts == {}
    write(8, space="[1, 2]")
    before = ctx.manifest
    answer = await reload_manifest(ctx, by="me", dry_run=True)
    assert str(answer["error"]).startswith("the manifest was not reloaded: search.space changed")
    assert ctx.manifest is before
