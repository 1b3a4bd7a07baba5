"""The wire format between eq-tui and its host scripts, shared by the shell and Slurm hosts."""

from __future__ import annotations

import pytest

from eq_tui.errors import HostError
from eq_tui.hosts.base import AttemptRef, PathCheck, ProbeRequest
from eq_tui.hosts.shell_protocol import (
    check_field,
    hex_lines,
    new_boundary,
    probe_stdin,
    split_sections,
)


def test_sections_codes_and_the_end_line() -> None:
    b = new_boundary()
    text = (f"noise before\n{b} slurm\n1|eq_a|RUNNING\n{b} slurm_rc 0\n{b} nodes\n"
            f"{b} nodes_rc 1\n{b} end\nafter the end\n")
    sections = split_sections(text, b)
    assert sections.ended
    assert sections.text("slurm") == "1|eq_a|RUNNING"
    assert sections.codes == {"slurm_rc": 0, "nodes_rc": 1}
    assert "nodes" in sections.lines and sections.text("missing") == ""


def test_output_cut_off_before_the_end_line_says_so() -> None:
    b = new_boundary()
    sections = split_sections(f"{b} sessions\nscreen 1.eq_a", b)
    assert not sections.ended and sections.lines["sessions"] == ["screen 1.eq_a"]
    assert split_sections(f"@@eq-forged end\n{b} x\n", b).ended is False


def test_hex_lines_decode_log_text_and_skip_garbage() -> None:
    lines = ["T\ta\t" + "héllo\n".encode().hex(), "T\tb\tzz", "L\ta\t41", "T\tshort"]
    assert hex_lines(lines, "T") == {"a": "héllo\n", "b": ""}
    assert hex_lines(lines, "L") == {"a": "A"}


@pytest.mark.parametrize("value", ["a\tb", "a\nb", "a\rb"])
def test_a_field_with_a_tab_or_newline_is_refused(value: str) -> None:
    with pytest.raises(HostError, match="tab or newline"):
        check_field(value, "session")
    with pytest.raises(HostError):
        probe_stdin(ProbeRequest(attempts=(AttemptRef("k", value, "/d", None),)))


def test_probe_requests_are_one_line_each() -> None:
    request = ProbeRequest(attempts=(AttemptRef("k", "eq_s", "/d", None),),
                           output_checks=(PathCheck("j", "out/*.json"),),
                           preconditions=(PathCheck("j", "data"),))
    assert probe_stdin(request) == b"A\tk\teq_s\t/d\t-\nO\tj\tout/*.json\nP\tj\tdata\n"
    assert probe_stdin(ProbeRequest()) == b""
