"""checkpoints.sh's lines as hosts/checkpoints.py reads them: newest first, the later name first
among equal times, a line that is not `MTIME<TAB>SIZE<TAB>PATH` skipped."""

from __future__ import annotations

from eq_tui.hosts.checkpoints import CheckpointFile, newest, parse_checkpoints


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


def test_the_newest_file_a_resume_may_use() -> None:
    """Pins the choice: the first (newest) file that has at least one byte and that no resume
    failed on; none when no file is left."""
    files = [CheckpointFile("c.pt", 0, 3.0), CheckpointFile("b.pt", 1, 2.0),
             CheckpointFile("a.pt", 9, 1.0)]
    assert newest(files) == CheckpointFile("b.pt", 1, 2.0)
    assert newest(files, failed={"b.pt"}) == CheckpointFile("a.pt", 9, 1.0)
    assert newest(files, failed={"a.pt", "b.pt"}) is None
    assert newest([]) is None


def test_a_name_with_blanks_is_one_path() -> None:
    """Pins the split on tabs alone: a glob's `*` matches names with blanks in them."""
    assert parse_checkpoints("100\t5\tckpt/epoch 1 of 2.pt\n") == [
        CheckpointFile("ckpt/epoch 1 of 2.pt", 5, 100.0)]
