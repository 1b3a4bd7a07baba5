"""The contract between an engine and its front ends, and the only part of eq-tui's engine side
that a front end imports (import-linter enforces it): the EngineClient interface and the typed
snapshot, job record and command result (client), one typed command per verb (commands), the
events, job statuses and the run-state records (model), the shared reducer that keeps a
snapshot current (ProjectState), progress out of a log line, and the control socket's client
side (ControlClient, ReconnectingClient).

The engine imports this package too; nothing here imports the engine."""

from __future__ import annotations

from eq_tui.api.client import (
    COMMANDS,
    CommandResult,
    EngineClient,
    GpuView,
    HostEntry,
    JobRecord,
    NodeView,
    Snapshot,
)
from eq_tui.api.events import (
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
    QueueReopened,
    QueueWaiting,
    event_from_json,
)
from eq_tui.api.model import FailureClass, JobState, JobStatus
from eq_tui.api.progress_line import progress_fraction
from eq_tui.api.reducer import Applied, ProjectState

__all__ = [
    "COMMANDS", "Alert", "Applied", "CommandResult", "EngineClient", "Event", "FailureClass",
    "GpuView", "HostEntry", "HostProbed", "HostStateChanged", "JobRecord", "JobState",
    "JobStateChanged", "JobStatus", "JobUpdated", "NodeView", "PhaseHeld", "PhaseReleased",
    "PreflightReported", "ProjectState", "QueueFinished", "QueuePaused", "QueueReopened",
    "QueueWaiting", "Snapshot", "event_from_json", "progress_fraction",
]
