"""The terminal-line model (hosts/term_lines.py): a log's text as the lines a terminal shows,
one per progress bar in its newest state, with nested tqdm bars' ESC[A redraws; bounded on junk."""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

from eq_tui.api.local_tail import MAX_BYTES, read_tail
from eq_tui.hosts.logclean import clean_text
from eq_tui.hosts.term_lines import MAX_COLS, MAX_ROWS, terminal_lines
from tests.support.tqdm_writes import lightning_log

TAIL_SH = Path(__file__).parents[2] / "eq_tui" / "hosts" / "scripts" / "tail.sh"

# The bytes tqdm writes for `for i in tqdm(range(3), desc="outer"): for j in tqdm(range(2),
# desc="inner", leave=False): ...` to a file (not a tty: bar width 10, no dynamic columns), as
# tqdm/tqdm:tqdm/std.py writes them: every draw is `status_printer.print_status` ('\r' + the
# meter + blanks up to the previous draw's length); a bar at position 1 wraps it in
# `tqdm.moveto(1)` ('\n') and `tqdm.moveto(-1)` (`_term_move_up()`, ESC[A) in `tqdm.display`;
# `tqdm.close` of the leave=False inner bar draws '' at its position (blanks as long as its
# last draw), of the outer bar (leave=True) draws it at position 0 and then writes '\n'.
TQDM_OUTER_FIRST = "\router:   0%|          | 0/3 [00:00<?, ?it/s]"
TQDM_INNER_RUN = ("\n\rinner:   0%|          | 0/2 [00:00<?, ?it/s]\x1b[A"
                  "\n\rinner:  50%|█████     | 1/2 [00:00<00:00,  9.98it/s]\x1b[A"
                  "\n\rinner: 100%|██████████| 2/2 [00:00<00:00,  9.97it/s]\x1b[A"
                  "\n\r" + " " * 52 + "\x1b[A")
TQDM_NESTED = (TQDM_OUTER_FIRST + TQDM_INNER_RUN
               + "\router:  33%|███▎      | 1/3 [00:00<00:00,  4.98it/s]" + TQDM_INNER_RUN
               + "\router:  67%|██████▋   | 2/3 [00:00<00:00,  4.97it/s]" + TQDM_INNER_RUN
               + "\router: 100%|██████████| 3/3 [00:00<00:00,  4.97it/s]"
               + "\router: 100%|██████████| 3/3 [00:00<00:00,  4.97it/s]\n")


def test_tqdm_nested_bars_are_one_line_each_in_their_newest_state() -> None:
    assert terminal_lines(TQDM_NESTED) == [
        "outer: 100%|██████████| 3/3 [00:00<00:00,  4.97it/s]"]
    # inside the second inner run: the outer bar at 1/3 above the inner bar's newest draw
    cut = TQDM_NESTED.index("inner:  50%", TQDM_NESTED.index("1/3"))
    middle = TQDM_NESTED[:TQDM_NESTED.index("\x1b[A", cut) + 3]
    assert terminal_lines(middle) == ["outer:  33%|███▎      | 1/3 [00:00<00:00,  4.98it/s]",
                                      "inner:  50%|█████     | 1/2 [00:00<00:00,  9.98it/s]"]
    # split on '\n' the same bytes are 13 lines, most of them the inner bar's old draws
    assert len(TQDM_NESTED.split("\n")) - 1 == 13


def test_a_lightning_log_shows_the_newest_epoch_while_validation_redraws_under_it() -> None:
    writes = lightning_log(3)
    text = "".join(writes)
    shown = terminal_lines(text)
    assert shown == ["GPU available: True (cuda), used: True",
                     "Epoch 2: 100%|██████████| 5/5 [00:05<00:00, 12.05it/s, v_num=0, "
                     "val_loss=0.700]"]
    # mid-validation of epoch 2: the main bar's row above the validation bar's newest draw
    during = "".join(writes[:writes.index(next(w for w in writes if "Epoch 2: 100%" in w)) + 10])
    assert terminal_lines(during)[-2:] == [
        "Epoch 2: 100%|██████████| 5/5 [00:05<00:00, 12.05it/s, v_num=0, val_loss=0.800]",
        "Validation DataLoader 0:  26%|██        | 8/30 [00:00<00:00, 120.00it/s]"]
    # the job's next epoch, drawn over the same row: the newest Epoch shows
    epoch_3 = text + "\rEpoch 3:  40%|████      | 2/5 [00:02<00:03, 12.05it/s, v_num=0]"
    assert terminal_lines(epoch_3)[-1].startswith("Epoch 3:  40%")


def test_a_tail_that_starts_inside_a_validation_still_shows_the_bar_above() -> None:
    """`tail -n` of such a log begins below the main bar: its ESC[A goes above the first line."""
    text = "".join(lightning_log(2, val_batches=300))
    last_lines = "\n".join(text.split("\n")[-200:])  # what tail.sh sends for 200 lines
    assert terminal_lines(last_lines)[-1].startswith("Epoch 1: 100%|")
    assert clean_text(last_lines.encode()) == terminal_lines(last_lines)


def test_carriage_return_backspace_and_erase_act_as_on_a_terminal() -> None:
    assert terminal_lines("10%\r50%\r100%\nlast\n") == ["100%", "last"]
    assert terminal_lines("epoch 1 loss 0.75\rep 2\x1b[K") == ["ep 2"]
    assert terminal_lines("keep\nold line\x1b[2K\rnew\n") == ["keep", "new"]
    assert terminal_lines("abc\b\bX") == ["aXc"]  # \b moves back; it erases nothing
    assert terminal_lines("1/9 [=>...]\b\b\b\b\b\b\b\b\b\b\b\r2/9 [==>..]") == ["2/9 [==>..]"]
    assert terminal_lines("abcdef\x1b[3D\x1b[1K|") == ["   |ef"]
    assert terminal_lines("a\nb\x1b[5Bc\n") == ["a", "bc"]  # down stops at the last line
    assert terminal_lines("row0\nrow1\x1b[F\x1b[2Gx\x1b[E!") == ["rxw0", "!ow1"]
    assert terminal_lines("\x1b[1;31mred\x1b[0m \x1b]0;title\x07\x1b[?25lok\x1b(B") == ["red ok"]
    assert terminal_lines("a\n\nb\n\n\n") == ["a", "", "b"]


def test_junk_is_bounded_in_memory_and_time() -> None:
    junk = random.Random(41).randbytes(10 << 20)
    started = time.process_time()
    lines = clean_text(junk)
    shown = clean_text(b"x" * (10 << 20))
    ups = terminal_lines("\x1b[A" * (1 << 20) + "\x1b[99999999999999999999A\x1b[999999999B\n")
    feeds = terminal_lines("\n".join(str(i) for i in range(100_000)))
    spent = time.process_time() - started
    assert all("\x1b" not in line and "\r" not in line and len(line) <= MAX_COLS
               for line in lines) and len(lines) <= MAX_ROWS
    assert shown == ["x" * MAX_COLS] and ups == []
    assert len(feeds) <= 2 * MAX_ROWS and feeds[-1] == "99999"
    assert spent < 10.0, spent  # generous: each of these takes well under a second


def test_a_local_tail_inside_one_long_bar_line_shows_its_newest_redraw(tmp_path: Path) -> None:
    """A bar redrawn with \\r for a whole epoch is one line longer than the megabyte read."""
    log = tmp_path / "log"
    redraws = "".join(f"\rEpoch 0: {i // 1000:3d}%| {i}/100000 [00:00<00:00, 9.9it/s]"
                      for i in range(100_000))
    log.write_text("Sanity Checking DataLoader 0: 100%\n" + redraws, encoding="utf-8")
    assert log.stat().st_size > MAX_BYTES
    assert read_tail(log, 200) == ["Epoch 0:  99%| 99999/100000 [00:00<00:00, 9.9it/s]"]


def test_tail_sh_sends_a_bounded_tail_of_a_long_bar_line(tmp_path: Path) -> None:
    redraws = "".join(f"\rstep {i:7d} loss 0.5" for i in range(1_000_000))
    (tmp_path / "log").write_text("header\n" + redraws + "\n", encoding="utf-8")
    out = subprocess.run(["sh", str(TAIL_SH), str(tmp_path), "200"], capture_output=True,
                         check=True).stdout
    assert len(out) <= 131072 and clean_text(out) == ["step  999999 loss 0.5"]
