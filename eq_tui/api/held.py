"""What a person runs for a phase the crash guard holds: the exact commands, as the engine's
alert, the phase_held event (and so the notification), `--no-ui` and `eq-tui status` say."""

from __future__ import annotations

import shlex


def held_phase_todo(run_dir: str, phase: str, job: str | None) -> str:
    """The commands for phase `phase` of the run in `run_dir`, `job` one of its stuck jobs."""
    where = shlex.quote(run_dir)
    retry = (f"`eq-tui retry {where} {shlex.quote(job)}` (retries it and releases the phase; "
             "r on it in the UI)" if job else f"`eq-tui retry {where} JOB` on one of its jobs")
    return (f"it waits for a person: fix the command, then {retry}, or "
            f"`eq-tui release {where} --phase {shlex.quote(phase)}` to launch the rest as they "
            "are")
