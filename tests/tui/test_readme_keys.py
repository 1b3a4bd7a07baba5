"""What README.md's key table and `?` say of the keys is what the app binds (issue 33: README's
`d` for details was `enter`; `?` said marks act on k/r/u where README said k/r/u/h/+/-), each key
is bound once, and held jobs sort among the waiting ones in "active first"."""

from __future__ import annotations

import re
from pathlib import Path

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.job_table import ACTIVE_FIRST, JobTable
from eq_tui.tui.keys import KEYS, OTHER_KEYS
from eq_tui.tui.row_table import RowTable
from eq_tui.tui.screens.help import help_content
from tests.tui.fake_client import T0, FakeClient, job, sample_snapshot

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
BOUND = {name for key in KEYS for name in (key.key, key.written, key.glyph) if name}
# keys that are no binding of the app: the palette's, Textual's focus keys and the table's
# scrolling (row_table.py), as OTHER_KEYS lists them
NOT_APP = {"ctrl+p", "tab", "left", "right", "home", "end", "up", "down", "shift+tab"}


def keys_table() -> str:
    """The README's table of keys, under "The UI and its keys"."""
    start = README.index("| key | what it does |", README.index("## The UI and its keys"))
    return README[start:README.index("\n\n", start)]


def test_every_key_readme_names_is_bound_and_every_binding_is_named() -> None:
    rows = keys_table().splitlines()[2:]
    named = set(re.findall(r"`([^`]+)`", keys_table()))
    unbound = named - BOUND - NOT_APP
    assert not unbound, f"README names keys the app does not bind: {unbound}"
    in_key_column = {key for row in rows for key in re.findall(r"`([^`]+)`", row.split("|")[1])}
    unnamed = {key.written for key in KEYS} - in_key_column
    assert not unnamed, f"README's key table leaves out: {unnamed}"
    assert {k for line in OTHER_KEYS for k in re.split(r" / ", line[0])} <= NOT_APP


def test_readme_points_at_the_keys_that_open_each_screen() -> None:
    action = {key.written: key.action for key in KEYS}
    for screen, opens in (("details", "details"), ("results", "push_screen('results')")):
        for key in re.findall(rf"{screen}(?: screen)?\*?\*? \(`([^`]+)`\)", README):
            assert action.get(key) == opens, f"README: {screen} ({key!r})"


def test_each_key_is_bound_once_and_the_table_binds_only_its_cursor() -> None:
    keys = [key.key for key in KEYS]
    assert len(keys) == len(set(keys))
    assert "BINDINGS" not in vars(JobTable) and "BINDINGS" in vars(RowTable)
    app = EqTuiApp([FakeClient()], clock=lambda: T0)
    textual_own = {"ctrl+q", "ctrl+c", "ctrl+p"}  # quit and the palette, Textual's
    bound = [key for key, found in app._bindings.key_to_bindings.items()
             for _ in found if key not in textual_own]
    assert sorted(bound) == sorted(keys)


def test_help_says_which_keys_act_on_the_marked_jobs() -> None:
    text = str(help_content())
    assert "k, r, u, h, + and - then act on every marked job" in text
    assert "(`k`, `r`, `u`, `h`, `+` and `-` then act on every marked job)" in README.replace(
        "\n", " ")


async def test_held_jobs_sort_with_the_waiting_ones_in_active_first() -> None:
    assert ACTIVE_FIRST["held"] == ACTIVE_FIRST["pending"] < ACTIVE_FIRST["completed"]
    snapshot = sample_snapshot()
    snapshot["jobs"].insert(0, job("on_hold", "held"))
    app = EqTuiApp([FakeClient(snapshot)], clock=lambda: T0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        table = app.query_one(JobTable)
        order = [key.partition("/")[2] for key in table.keys]
        # after the running ones, among the pending ones (in manifest order), before completed
        assert order.index("train_lr0.03_s2") < order.index("on_hold") < order.index(
            "student_s9") < order.index("train_lr0.1_s1")
