"""The engine and its public surface. Front ends import from here only: the front-end contract
(EngineClient and the typed snapshot, job record and command result), the events, job
statuses, the shared reducer (ProjectState), progress out of a log line and a running job's
pace (PaceBook), and — lazily, since it pulls in the hosts — the Engine and its control
socket."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eq_tui.engine.client import (
    COMMANDS,
    CommandResult,
    EngineClient,
    GpuView,
    HostEntry,
    JobRecord,
    NodeView,
    Snapshot,
)
from eq_tui.engine.events import (
    Alert,
    Event,
    HostProbed,
    HostStateChanged,
    JobStateChanged,
    JobUpdated,
    PhaseHeld,
    PhaseReleased,
    PreflightReported,
    QueueFinished,
    QueuePaused,
    QueueWaiting,
    event_from_json,
)
from eq_tui.engine.model import FailureClass, JobState, JobStatus
from eq_tui.engine.pace import Pace, PaceBook, completed_duration
from eq_tui.engine.progress_line import progress_fraction
from eq_tui.engine.view import Applied, ProjectState

if TYPE_CHECKING:
    from eq_tui.engine.control import ControlClient, serve_control
    from eq_tui.engine.engine import Engine

_LAZY = {"Engine": "eq_tui.engine.engine", "ControlClient": "eq_tui.engine.control",
         "serve_control": "eq_tui.engine.control"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'eq_tui.engine' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "COMMANDS", "Alert", "Applied", "CommandResult", "ControlClient", "Engine", "EngineClient",
    "Event", "FailureClass", "GpuView", "HostEntry", "HostProbed", "HostStateChanged",
    "JobRecord", "JobState", "JobStateChanged", "JobStatus", "JobUpdated", "NodeView", "Pace",
    "PaceBook", "PhaseHeld", "PhaseReleased", "PreflightReported", "ProjectState",
    "QueueFinished", "QueuePaused", "QueueWaiting", "Snapshot",
    "completed_duration", "event_from_json", "progress_fraction", "serve_control",
]
