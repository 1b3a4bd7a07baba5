"""checkpoints.sh's lines as hosts/checkpoints.py reads them: newest first, the later name first
among equal times, a line that is not `MTIME<TAB>SIZE<TAB>PATH` skipped."""

from __future__ import annotations

from eq_tui.hosts.checkpoints import CheckpointFile, parse_checkpoints


def test_the_scripts_lines_are_read_newest_first_and_odd_lines_skipped() -> None:
    out = ("100.5\t10\ta.pt\n"
           "300.25\t7\tc.pt\n"
           "garbage\n"
           "x\t1\tbad-time.pt\n"
           "200\t5\tb.pt\n"
           "300.25\t3\tb2.pt\n"
           "400\t3\t\n")
    assert parse_checkpoints(out) == [CheckpointFile("c.pt", 7, 300.25),
                                      CheckpointFile("b2.pt", 3, 300.25),
                                      CheckpointFile("b.pt", 5, 200.0),
                                      CheckpointFile("a.pt", 10, 100.5)]
