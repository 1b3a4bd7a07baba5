"""The lab's rules file, rule by rule (hosts/lab_rules.py; tests/integration/test_lab_rules.py
runs them through engines): each way of writing a rule, each mistake and the words that say
where it is, the edges of an interactive window (its first and last minute, past midnight,
from Sunday into Monday), the per-user limit at exactly N, and what a probe's rules section
reads as."""

from __future__ import annotations

import re

import pytest

from eq_tui.hosts.lab_rules import (
    HostLab,
    LabRules,
    RulesError,
    Window,
    closed_gpus,
    needs_clock,
    parse_lab,
    parse_rules,
    preferred,
    user_cap,
)

WEEKDAYS = frozenset({1, 2, 3, 4, 5})
MON, TUE, FRI, SAT, SUN = 1, 2, 5, 6, 7


def at(hours: int, minutes: int = 0) -> int:
    return hours * 60 + minutes


def test_a_daytime_window_opens_at_its_start_and_closes_at_its_end() -> None:
    window = Window(frozenset({6}), at(9), at(19), WEEKDAYS, "09:00-19:00")
    assert not window.open_at(at(8, 59), TUE)
    assert window.open_at(at(9), TUE)
    assert window.open_at(at(18, 59), TUE)
    assert not window.open_at(at(19), TUE)
    assert not window.open_at(at(12), SAT)  # not a listed day
    # a window that starts and ends at the same minute is never open
    assert not Window(frozenset({6}), at(9), at(9), WEEKDAYS, "09:00-09:00").open_at(at(9), TUE)


def test_a_window_past_midnight_is_the_evening_of_a_listed_day_and_the_morning_after() -> None:
    friday_night = Window(frozenset({5}), at(22), at(6), frozenset({FRI}), "22:00-06:00")
    assert not friday_night.open_at(at(21, 59), FRI)
    assert friday_night.open_at(at(22), FRI)
    assert friday_night.open_at(at(5, 59), SAT)
    assert not friday_night.open_at(at(6), SAT)
    assert not friday_night.open_at(at(23), SAT)  # Saturday evening is not listed
    assert not friday_night.open_at(at(3), FRI)  # Friday's small hours follow Thursday
    sunday_night = Window(frozenset({5}), at(22), at(6), frozenset({SUN}), "22:00-06:00")
    assert sunday_night.open_at(at(3), MON)  # the morning after Sunday is Monday's
    assert not sunday_night.open_at(at(3), SUN)


def test_each_way_of_writing_a_rule_reads_as_it_says() -> None:
    assert parse_rules("keep_free: 3").keep_free == {3: ""}
    assert parse_rules("keep_free: []").keep_free == {}
    assert parse_rules("keep_free: [{gpus: [7], why: demo}, {gpus: 2}]").keep_free == {
        7: "demo", 2: ""}
    reserved = parse_rules("reserve:\n  - {gpus: [0, 1], for: alice}\n"
                           "  - {gpus: 1, for: [bob, carol]}\n").reserved
    assert reserved == {0: frozenset({"alice"}), 1: frozenset({"alice", "bob", "carol"})}
    assert parse_rules("max_gpus_per_user: 1").max_gpus_per_user == 1
    [window] = parse_rules("interactive: [{gpus: 6, hours: ' 9:05 - 24:00', days: Monday}]"
                           ).interactive
    assert window == Window(frozenset({6}), at(9, 5), at(24), frozenset({MON}), "9:05-24:00")
    [every_day] = parse_rules("interactive: [{gpus: [1], hours: '00:00-23:59'}]").interactive
    assert every_day.days == frozenset(range(1, 8))
    [cased] = parse_rules("interactive: [{gpus: [1], hours: '01:00-02:00', days: [SUN, sat]}]"
                          ).interactive
    assert cased.days == frozenset({SAT, SUN})
    assert parse_rules("prefer: [3, 0, 2]").prefer == (3, 0, 2)
    assert parse_rules("prefer: []").prefer == ()
    assert parse_rules("# nothing yet\n") == LabRules()


@pytest.mark.parametrize(("text", "says"), [
    ("keep_free: [1\nprefer: [2]", "line 2: expected ',' or ']', but got ':'"),
    # an error YAML gives no line for (a character no YAML may hold)
    ("keep_free: [\x07]", "unacceptable character #x0007: special characters are not allowed"),
    ("just words", "the file is not a mapping of rules"),
    ("zeta: 1\nalpha: 2", "unknown rule 'alpha' (known: interactive, keep_free, "
                          "max_gpus_per_user, prefer, reserve)"),
    ("keep_free: true", "keep_free: a list of mappings, e.g. [{gpus: [0], ...}]"),
    ("keep_free: [1, -1]", "keep_free: GPUs are a list of indices, e.g. [0, 1]"),
    ("keep_free: [true]", "keep_free: GPUs are a list of indices"),
    ("keep_free: [{gpus: []}]", "keep_free[0].gpus: GPUs are a list of indices"),
    ("keep_free: [{gpus: [1]}, 7]", "keep_free: a list of mappings"),
    ("reserve: {gpus: [1], for: [a]}", "reserve: a list of mappings"),
    ("reserve: [{gpus: [1], for: []}]", "reserve[0].for: a list of user names"),
    ("reserve: [{gpus: [1], for: ['']}]", "reserve[0].for: a list of user names"),
    ("reserve: [{gpus: [1], for: [a]}, {gpus: [2], for: [1]}]", "reserve[1].for: "),
    ("reserve: [{gpus: [1.5], for: [a]}]", "reserve[0].gpus: "),
    ("max_gpus_per_user: 0", "max_gpus_per_user: a whole number, at least 1"),
    ("max_gpus_per_user: true", "max_gpus_per_user: a whole number"),
    ("max_gpus_per_user: '2'", "max_gpus_per_user: a whole number"),
    ("interactive: [{gpus: [1], hours: '09:00-17:00', who: me}]",
     "interactive[0]: unknown key 'who'"),
    ("interactive: [{gpus: [1]}]", "interactive[0].hours: HH:MM-HH:MM, e.g. \"09:00-19:00\""),
    ("interactive: [{gpus: [1], hours: '09:00-17:00'}, {gpus: [2], hours: '25:00-26:00'}]",
     "interactive[1].hours: '25:00-26:00' is not a time of day"),
    ("interactive: [{gpus: [1], hours: '09:00-24:60'}]",
     "interactive[0].hours: '09:00-24:60' is not a time of day"),
    ("interactive: [{gpus: [1], hours: '09:60-10:00'}]", "interactive[0].hours: '09:60"),
    ("interactive: [{gpus: [1], hours: '25:00-10:00'}]", "interactive[0].hours: '25:00-10:00'"),
    ("interactive: [{gpus: [1], hours: '10:00-25:00'}]", "interactive[0].hours: '10:00-25:00'"),
    ("interactive: [{gpus: [1], hours: '09:00-10:00', days: []}]",
     "interactive[0].days: a list of mon, tue, wed, thu, fri, sat, sun"),
    ("interactive: [{gpus: [1], hours: '09:00-10:00', days: [mon, xyz]}]",
     "interactive[0].days: "),
    ("interactive: [{gpus: [], hours: '09:00-10:00'}]", "interactive[0].gpus: "),
    ("interactive: {gpus: [1]}", "interactive: a list of mappings"),
    ("prefer: [1, 1]", "prefer: each GPU once"),
    ("prefer: 3", "prefer: each GPU once"),
    ("prefer: [0, x]", "prefer: GPUs are a list of indices"),
])
def test_what_is_not_a_rule_says_what_and_where(text: str, says: str) -> None:
    with pytest.raises(RulesError, match="^" + re.escape(says)) as raised:
        parse_rules(text)
    if says.startswith(("line ", "unacceptable")):
        assert str(raised.value) == says  # YAML's own words, whole


def test_the_edges_of_a_time_of_day_are_times_of_day() -> None:
    [window] = parse_rules("interactive: [{gpus: [1], hours: '24:59-00:00'}]").interactive
    assert (window.start, window.end) == (at(24, 59), 0)
    [night] = parse_rules("interactive: [{gpus: [1], hours: '22:30-06:15'}]").interactive
    assert (night.start, night.end) == (at(22, 30), at(6, 15))


def test_a_probes_rules_section_reads_as_the_host_lab() -> None:
    lab = parse_lab(["keep_free: [7]", "max_gpus_per_user: 2"], path="/r.yaml", user="me",
                    clock=" 9:05 3 ", waiting=["me", "", "you", "you", "them"],
                    checksum="1234 56 /r.yaml")
    assert lab == HostLab(LabRules({7: ""}, {}, 2), "/r.yaml", "", "me", (at(9, 5), 3),
                          frozenset({"you", "them"}), "1234.56")
    gone = parse_lab(None, path="/r.yaml", user="me", clock="12:00 7", waiting=["you"],
                     checksum="1 2")
    assert gone == HostLab(None, "/r.yaml", "", "me", (at(12), 7), frozenset({"you"}), "-")
    broken = parse_lab(["prefer: [1, 1]"], path="/r.yaml", user="me", clock="08:00 1",
                       waiting=["you"], checksum="9 8")
    assert broken == HostLab(None, "/r.yaml", "lab rules /r.yaml ignored, none apply until it "
                             "is fixed: prefer: each GPU once", "me", (at(8), MON),
                             frozenset({"you"}), "9.8")
    # a probe that sent no checksum leaves it unknown, not "-" (no file) nor made up
    assert parse_lab([], path="p", user="u", clock=None, waiting=()).checksum == ""
    for clock in ("", None, "12:00", "12:00 8", "12:00 0", "x12:00 1", "123:00 1", "1:5 1"):
        assert parse_lab([], path="p", user="u", clock=clock, waiting=()).clock is None


def test_the_clock_is_read_only_for_rules_with_hours() -> None:
    assert needs_clock("interactive: [{gpus: [1], hours: '09:00-17:00'}]")
    assert not needs_clock("keep_free: [1]\nprefer: [1, 0]")


def test_what_each_rule_closes_and_the_first_reason_for_a_gpu_stands() -> None:
    rules = parse_rules("keep_free: [{gpus: [0], why: demo}, {gpus: [4]}]\n"
                        "reserve: [{gpus: [0, 1, 2], for: [ann, bob]}]\n"
                        "interactive: [{gpus: [0, 1, 3, 2], hours: '09:00-17:00'}]\n")
    morning = HostLab(rules, user="cat", clock=(at(10), MON))
    assert closed_gpus(morning, "box") == {
        0: "box keeps GPU 0 free (demo)", 4: "box keeps GPU 4 free",
        1: "box reserves GPU 1 for ann, bob", 2: "box reserves GPU 2 for ann, bob",
        3: "box keeps GPU 3 free for interactive use (09:00-17:00)"}
    assert list(closed_gpus(HostLab(rules, user="bob", clock=(at(10), MON)), "box")) == [
        0, 4, 1, 2, 3]  # bob's reservation stands open to him; the window closes 1-3
    assert closed_gpus(HostLab(rules, user="bob", clock=(at(18), MON)), "box") == {
        0: "box keeps GPU 0 free (demo)", 4: "box keeps GPU 4 free"}
    assert closed_gpus(HostLab(rules, user="bob"), "box") == {  # no clock read: no window
        0: "box keeps GPU 0 free (demo)", 4: "box keeps GPU 4 free"}
    assert closed_gpus(HostLab(None, user="bob", clock=(at(10), MON)), "box") == {}


def test_the_per_user_limit_binds_at_exactly_n_while_another_user_waits() -> None:
    lab = HostLab(LabRules(max_gpus_per_user=2), user="bob", waiting=frozenset({"eve", "al"}))
    assert user_cap(lab, "box", [1]) is None
    assert user_cap(lab, "box", [1, 1, 2, 2]) == (  # GPUs, not claims, count
        "box allows 2 GPU(s) per user while others wait (al, eve); bob hold 2")
    assert user_cap(lab, "box", [1, 2, 3]) == (
        "box allows 2 GPU(s) per user while others wait (al, eve); bob hold 3")
    nameless = HostLab(LabRules(max_gpus_per_user=1), waiting=frozenset({"eve"}))
    assert user_cap(nameless, "box", [0]) == (
        "box allows 1 GPU(s) per user while others wait (eve); you hold 1")
    assert user_cap(HostLab(LabRules(max_gpus_per_user=1), user="bob"), "box", [0, 1]) is None
    assert user_cap(HostLab(LabRules(), user="bob", waiting=frozenset({"eve"})), "box",
                    [0, 1]) is None
    assert user_cap(HostLab(None, user="bob", waiting=frozenset({"eve"})), "box", [0]) is None


def test_free_gpus_go_in_the_rules_order_then_the_rest_by_index() -> None:
    assert preferred((3, 1), [0, 1, 2, 3, 4]) == [3, 1, 0, 2, 4]
    assert preferred((5, 3), [4, 3, 0]) == [3, 0, 4]
    assert preferred((), [2, 0, 1]) == [0, 1, 2]
