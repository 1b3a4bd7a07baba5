"""The dialogs' words: the singular for one job; no "keep running" once the queue finished."""

from __future__ import annotations

from eq_tui.tui.wording import kill_dialog, quit_message


def test_a_one_job_kill_dialog_is_in_the_singular() -> None:
    title, message = kill_dialog(["a"])
    assert title == "Kill a?" and "Its session is stopped and it ends" in message
    assert "Their" not in message and "them" not in message
    title, message = kill_dialog([f"j{i}" for i in range(14)])
    assert title == "Kill 14 jobs?" and "and 2 more" in message and "Their sessions" in message


def test_the_quit_message_follows_the_queue() -> None:
    assert "keep running" in quit_message(detach=False, attach_hint="", finished=False)
    done = quit_message(detach=False, attach_hint="", finished=True)
    assert "keep running" not in done and "finished" in done
    assert "eq-tui attach R" in quit_message(detach=True, attach_hint="eq-tui attach R",
                                             finished=False)
