"""An attempt's log read straight from this machine's disk: what an attached UI shows once the
engine that would read it has exited (at the end of a detached run) or while its link is down.

Only a log that is on this machine: an attempt of a `local` or simulated host, or one whose
log lies inside the run dir (a Slurm attempt through the local client). An SSH host's log path
names a file on that host, so it is never looked for here."""

from __future__ import annotations

import os
from pathlib import Path

from eq_tui.api.reducer import ProjectState
from eq_tui.hosts.logclean import clean_text

LOCAL_KINDS = frozenset({"local", "sim"})
MAX_BYTES = 1 << 20  # the tail of a log is in its last megabyte


def local_log_path(state: ProjectState, job_id: str, attempt: int | None) -> Path | None:
    """The log file of a job's attempt (None: its current one) when it is on this machine."""
    job = state.jobs.get(job_id)
    history = list(job.get("history") or []) if job is not None else []
    chosen = (history[-1] if history else None) if attempt is None else next(
        (a for a in history if a.get("n") == attempt), None)
    if chosen is None:
        return None
    log = chosen.get("log") or (f"{chosen['attempt_dir']}/log" if chosen.get("attempt_dir")
                                else None)
    if not log:
        return None
    path = Path(str(log))
    host = state.hosts.get(str(chosen.get("host") or ""), {})
    here = host.get("kind") in LOCAL_KINDS
    if not here and state.run_dir:
        here = Path(os.path.abspath(path)).is_relative_to(os.path.abspath(state.run_dir))
    return path if here else None


def read_tail(path: Path, lines: int) -> list[str]:
    """The last `lines` lines of a file (none when it is not there yet)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - MAX_BYTES))
            data = handle.read()
    except FileNotFoundError:
        return []
    if size > MAX_BYTES:  # the first line read is cut: start at the next line or bar redraw
        breaks = [at for at in (data.find(b"\n"), data.find(b"\r")) if at >= 0]
        data = data[min(breaks) + 1:] if breaks else data
    return clean_text(data)[-max(1, lines):]
