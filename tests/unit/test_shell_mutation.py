"""The host scripts' mutants (bench/shell_mutants.py): each operator makes the mutant a shell bug
would, once per place; comments, quoted strings, expansions, arithmetic and data heredocs are
never mutated; every mutant of a real script is still a script `sh -n` accepts (a syntax error
would be killed by any test and score for nothing)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.shell_mutants import code_view, mutants, script_mutants
from bench.shell_mutation import SCRIPTS

ROOT = Path(__file__).resolve().parents[2]


def made(text: str) -> dict[str, str]:
    """Each mutant's name → the mutated text."""
    return {m.name: m.apply(text) for m in mutants(text)}


def test_numeric_tests_are_swapped_each_way_the_brief_names() -> None:
    text = '[ "$a" -lt 1 ] || x\n[ "$a" -le 1 ] || x\n[ "$a" -gt 1 ] || x\n' \
           '[ "$a" -ge 1 ] || x\n[ "$a" -eq 1 ] || x\n[ "$a" -ne 1 ] || x\n'
    got = {name: out.splitlines()[int(name[1]) - 1] for name, out in made(text).items()
           if name.split(":")[1].startswith("-")}
    assert got == {
        "L1:-lt/-le": '[ "$a" -le 1 ] || x', "L1:-lt/-gt": '[ "$a" -gt 1 ] || x',
        "L2:-le/-lt": '[ "$a" -lt 1 ] || x',
        "L3:-gt/-ge": '[ "$a" -ge 1 ] || x', "L3:-gt/-lt": '[ "$a" -lt 1 ] || x',
        "L4:-ge/-gt": '[ "$a" -gt 1 ] || x',
        "L5:-eq/-ne": '[ "$a" -ne 1 ] || x', "L6:-ne/-eq": '[ "$a" -eq 1 ] || x'}


def test_list_operators_are_swapped() -> None:
    assert made("a && b || c\n") == {"L1:&&/||": "a || b || c\n", "L1:||/&&": "a && b && c\n"}


def test_a_bang_is_dropped_and_one_is_added_before_a_condition() -> None:
    text = "if ! mkdir d; then x; fi\nwhile [ ! -e f ]; do y; done\n"
    got = made(text)
    assert got["L1:!/drop"] == "if mkdir d; then x; fi\n" + text.split("\n", 1)[1]
    assert got["L2:!/drop"] == text.split("\n")[0] + "\nwhile [ -e f ]; do y; done\n"
    assert got["L2:!/add"] == text.split("\n")[0] + "\nwhile ! [ ! -e f ]; do y; done\n"
    assert "L1:!/add" not in got  # not `! ! mkdir`


def test_exit_and_return_statuses_change() -> None:
    text = "f() { return 0; }\ng() { return 1; }\nif f && g; then exit 10; fi\nexit 0\n"
    got = made(text)
    assert got["L1:return0/1"].startswith("f() { return 1; }")
    assert got["L2:return1/0"].splitlines()[1] == "g() { return 0; }"
    assert got["L3:exit10/0"].splitlines()[2] == "if f && g; then exit 0; fi"
    assert got["L4:exit0/1"].splitlines()[3] == "exit 1"


def test_a_return_is_mutated_only_where_some_caller_reads_the_status() -> None:
    functions = "".join(f"{name}() {{\n    x || return 1\n    return 0\n}}\n"
                        for name in ("quiet", "cond", "last", "asked", "listed"))
    calls = ("quiet a\n[ -z \"$r\" ] || quiet b\n"  # statements of their own: never read
             "if cond; then :; fi\n"
             "wrap() {\n    last\n}\n"  # a body's last command: its status is the body's
             "asked\necho \"$?\"\n"
             "listed && :\n")
    got = {m.name for m in mutants(functions, (calls,)) if "return" in m.name}
    assert got == {f"L{line}:{op}" for first in (6, 10, 14, 18)
                   for line, op in ((first, "return1/0"), (first + 1, "return0/1"))}
    # a function no script calls has no reader either
    assert not [m for m in mutants(functions) if "return" in m.name]


def test_an_if_condition_becomes_true_or_false_even_across_lines() -> None:
    text = 'if [ -n "$a" ] &&\n   [ -n "$b" ]; then x; elif y; then z; fi\n'
    got = made(text)
    assert got["L1:if/true"] == "if true; then x; elif y; then z; fi\n"
    assert got["L1:if/false"] == "if false; then x; elif y; then z; fi\n"
    assert got["L2:if/true"] == 'if [ -n "$a" ] &&\n   [ -n "$b" ]; then x; elif true; then z; fi\n'
    assert got["L1:!/add"].startswith('if ! [ -n "$a" ]')


def test_a_test_in_a_list_becomes_true_and_a_lone_test_does_not() -> None:
    text = '[ -z "$r" ] || refuse\nx &&\n    [ -f f ]\n[ -s f ]\n'
    got = made(text)
    assert got["L1:test/true"] == "true || refuse\n" + text.split("\n", 1)[1]
    assert got["L3:test/true"] == '[ -z "$r" ] || refuse\nx &&\n    true\n[ -s f ]\n'
    assert not [name for name in got if name.startswith("L4:")]


def test_redirections_swap_truncate_and_append_where_they_differ() -> None:
    text = "echo a > f\necho b >> f\necho c >&2\necho d 2>&1\necho e >/dev/null\n" \
           "echo f 2> /dev/null\n"
    assert made(text) == {"L1:>/>>": text.replace("a > f", "a >> f"),
                          "L2:>>/>": text.replace("b >> f", "b > f")}


def test_comments_quotes_expansions_arithmetic_and_data_heredocs_are_left_alone() -> None:
    text = ("# [ a -lt b ] && exit 1 > f\n"
            "x=1  # || y > z; return 0\n"
            "echo \"[ $a -lt 1 ] && b > c $(printf '%s' \"x || y\")\"\n"
            "awk '$1 > 3 && $2 < 4 { exit 1 }' f\n"
            "echo ${a:-x && y} $((a > b)) ${#a} $# \\&& d\n"
            "while read -r l; do :; done <<DATA\n"
            "a -lt b && exit 1 > f\n"
            "DATA\n")
    assert mutants(text) == [m for m in mutants(text) if m.name == "L6:!/add"]
    view = code_view(text)
    assert len(view) == len(text) and view.count("\n") == text.count("\n")


def test_a_heredoc_that_is_a_script_is_mutated_as_code() -> None:
    text = "cat > run.sh <<'WRAPPER'\n[ -s f ] || exit 3\nWRAPPER\n"
    assert set(made(text)) == {"L1:>/>>", "L2:test/true", "L2:||/&&", "L2:exit3/0"}


def test_names_are_unique_line_and_operator() -> None:
    got = [m.name for m in mutants("[ a ] && [ b ] && c\n")]
    assert got == ["L1:test/true", "L1:&&/||", "L1:test/true#2", "L1:&&/||#2"]


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_every_mutant_of_a_scored_script_is_valid_shell(script: str) -> None:
    source = (ROOT / script).read_text()
    found = script_mutants(ROOT / script)
    assert len({m.name for m in found}) == len(found)
    bad = []
    for mutant in found:
        text = mutant.apply(source)
        assert text != source, mutant.name
        check = subprocess.run(["sh", "-n"], input=text, capture_output=True, text=True)
        if check.returncode != 0:
            bad.append(f"{mutant.name}: {check.stderr.strip()}")
    assert not bad
