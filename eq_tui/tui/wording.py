"""What the confirmation dialogs say: in the singular for one job, and true to the queue's
state (nothing "keeps running" once the queue has finished)."""

from __future__ import annotations

NAMES_IN_CONFIRM = 12


def listed(names: list[str], most: int = NAMES_IN_CONFIRM) -> str:
    text = ", ".join(names[:most])
    return text + (f" and {len(names) - most} more" if len(names) > most else "")


def kill_dialog(names: list[str]) -> tuple[str, str]:
    """(title, message) of the kill confirmation."""
    if len(names) == 1:
        return (f"Kill {names[0]}?", f"{names[0]}\n\nIts session is stopped and it ends as "
                "killed; r brings it back.")
    return (f"Kill {len(names)} jobs?", f"{listed(names)}\n\nTheir sessions are stopped and "
            "they end as killed; r brings them back.")


def requeue_dialog(names: list[str]) -> tuple[str, str]:
    """(title, message) of the requeue confirmation: a running job loses its attempt's work."""
    if len(names) == 1:
        return (f"Requeue {names[0]}?", f"{names[0]}\n\nIts session is stopped and it goes back "
                "to the queue: it starts again from the beginning (or its last checkpoint).")
    return (f"Requeue {len(names)} jobs?", f"{listed(names)}\n\nTheir sessions are stopped and "
            "they go back to the queue: each starts again from the beginning (or its last "
            "checkpoint).")


def quit_message(*, detach: bool, attach_hint: str, finished: bool) -> str:
    if detach:
        return f"The engine keeps running in the background; attach again with `{attach_hint}`."
    if finished:
        return "The queue has finished; nothing is left running."
    return ("Jobs keep running in their sessions. Run the same command again to resume: "
            "finished jobs are picked up, running ones adopted.")
