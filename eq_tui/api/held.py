"""What a person runs for a phase the crash guard holds: the exact commands, as the engine's
alert, the phase_held event (and so the notification), `--no-ui` and `eq-tui status` say."""

from __future__ import annotations

import shlex


def held_phase_todo(run_dir: str, phase: str, job: str | None = None) -> str:
    """The commands for phase `phase` of the run in `run_dir`. One command retries every stuck
    job of the phase: they share the cause, and retrying one alone (which releases the phase)
    would leave the others stuck. `job`, one of them, is no longer named for that reason (the
    callers' alerts list them all)."""
    where, name = shlex.quote(run_dir), shlex.quote(phase)
    return (f"it waits for a person: fix the command, then `eq-tui retry {where} --stuck "
            f"--phase {name}` (retries every stuck job of the phase and releases it), or "
            f"`eq-tui release {where} --phase {name}` to launch the rest as they are")
