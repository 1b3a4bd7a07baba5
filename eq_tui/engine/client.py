"""The one interface front ends use to talk to an engine: a snapshot, events out, commands in.

The in-process engine implements it directly; the control socket client (attach) implements it
over newline-delimited JSON with the same shapes.

Snapshot shape (JSON-ready dict):
    {"project", "run_dir", "paused", "started_at", "now", "finished", "exit_code",
     "settings": {"max_attempts", "oom_delay", "threshold_mib", "waves", "poll"},
     "jobs": [JobState.to_json(), ...],                       # manifest order
     "hosts": [{"name", "kind", "state": "connecting|up|down", "reason", "since", "rtt_s",
                "stopped", "gpus": [GPU_VIEW, ...], "nodes": [NODE_VIEW, ...]}],
     "alerts": [Alert.to_json(), ...]}                        # most recent last, bounded
GPU_VIEW: {"index", "uuid", "name", "memory_used_mib", "memory_total_mib", "utilization_pct",
           "allowed": bool, "job": id | None, "other": bool, "settling": bool,
           "quarantined": bool}
           (a Slurm host's GPUs are its job slots: max_parallel, or its `gpus:` list)
NODE_VIEW: {"name", "state": Slurm's (e.g. "MIXED+DRAIN"), "gpus_used": int (by anyone),
            "gpus_total": int, "jobs": [id, ...] (ours running there)}
           (a Slurm host's partition nodes; empty for other hosts)
Events: see engine/events.py; HostProbed.gpus carries GPU_VIEW dicts, HostProbed.nodes
NODE_VIEW dicts (the last known list, refreshed every few seconds), JobUpdated.state a job.
Commands: kill | retry | requeue (take job ids), pause | resume | shutdown (no ids).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from eq_tui.engine.events import Event

COMMANDS = ("kill", "retry", "requeue", "pause", "resume", "shutdown")


class EngineClient(Protocol):
    project: str

    def snapshot(self) -> dict[str, Any]: ...

    def subscribe(self) -> asyncio.Queue[Event]:
        """A queue that receives every event published from now on."""
        ...

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None: ...

    async def command(self, name: str, job_ids: list[str] | None = None) -> dict[str, Any]:
        """Returns {"ok": bool, "results": {job_id: "ok" | reason}, "error": str | None}."""
        ...

    async def tail(self, job_id: str, attempt: int | None = None, lines: int = 200) -> list[str]:
        """The last lines of a job's attempt log (current attempt when None), cleaned of ANSI."""
        ...
