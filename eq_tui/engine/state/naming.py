"""Names the engine gives things on hosts: session names and attempt directories."""

from __future__ import annotations

import secrets

from eq_tui.manifest.ids import ID_PATTERN


def validate_id(value: str, what: str = "id") -> str:
    if not ID_PATTERN.fullmatch(value):
        raise ValueError(f"invalid {what} {value!r}: use letters, digits, '_', '.', '-'")
    return value


def new_run_token() -> str:
    return secrets.token_hex(3)


def _session_safe(value: str) -> str:
    # tmux rewrites '.' in session names; '+' never occurs in an id, so the mapping is injective.
    return value.replace(".", "+")


def session_name(project: str, token: str, job_id: str, attempt: int) -> str:
    """Unique per project run, job and attempt; matched exactly, never as a prefix."""
    validate_id(project, "project")
    validate_id(job_id, "job id")
    return f"eq_{_session_safe(project)}_{token}_{_session_safe(job_id)}_a{attempt}"


def attempt_dir(log_root: str, job_id: str, attempt: int) -> str:
    validate_id(job_id, "job id")
    return f"{log_root.rstrip('/')}/{job_id}/a{attempt}"
