"""`eq-tui status RUN_DIR --gpus`: who holds each GPU of the run's hosts, for scripts — our jobs,
other eq-tui users' jobs (by their claims: user, project, job) and other processes (user and
command) — as the running engine's last probe saw them (api/holders.py)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from eq_tui.api.client import Snapshot
from eq_tui.api.holders import gpu_holder_lines
from eq_tui.cli.status_report import _live_snapshot
from eq_tui.errors import RunDirError


def print_gpus(run_dir: Path, *, as_json: bool = False) -> int:
    if not (run_dir / "queue_state.json").exists():
        raise RunDirError(f"{run_dir}: no queue_state.json here (is this an eq-tui run dir?)")
    return show_gpus(asyncio.run(_live_snapshot(run_dir)), as_json=as_json)


def show_gpus(live: Snapshot | None, *, as_json: bool = False, where: str = "") -> int:
    """One line per GPU (or, with as_json, the hosts with their GPUs and holders). Only a
    running engine knows them: without one, a RunDirError."""
    if live is None:
        raise RunDirError(f"no engine is running for this run dir{where and ' on '}{where}: "
                          "who holds the GPUs is known only to a running engine")
    hosts: list[dict[str, Any]] = [dict(host) for host in live.get("hosts") or []]
    if as_json:
        print(json.dumps([
            {"host": host.get("name"), "state": host.get("state"),
             "gpus": [{"index": gpu.get("index"), "memory_used_mib": gpu.get("memory_used_mib"),
                       "memory_total_mib": gpu.get("memory_total_mib"),
                       "allowed": gpu.get("allowed", True),
                       "quarantined": gpu.get("quarantined", False),
                       "drained": gpu.get("drained", False),
                       "holders": gpu.get("holders") or (
                           [{"kind": "ours", "job": gpu["job"]}] if gpu.get("job") else [])}
                      for gpu in host.get("gpus") or []]}
            for host in hosts], indent=1))
        return 0
    lines = gpu_holder_lines(hosts)
    sys.stdout.write("".join(f"{line}\n" for line in lines) or "no GPU probed yet\n")
    return 0
