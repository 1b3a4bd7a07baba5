"""`eq-tui status HOST:RUN_DIR` and `eq-tui stop HOST:RUN_DIR`: the same as for a local run dir,
through the engine's control socket reached over SSH (or the state file there when no engine
runs)."""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
from typing import Any

from eq_tui.api.client import Snapshot
from eq_tui.api.model import JobState
from eq_tui.cli.remote.link import RemoteLink, RemoteRunDir, open_link
from eq_tui.cli.remote.target import RemoteTarget
from eq_tui.cli.status_gpus import show_gpus
from eq_tui.cli.status_report import from_snapshot, jobs_from_state, show_status
from eq_tui.errors import RunDirError


async def saved_state(link: RemoteLink, run_dir: RemoteRunDir) -> dict[str, Any]:
    """The state file of a remote run dir (or its previous good copy)."""
    for name in ("queue_state.json", "queue_state.prev.json"):
        saved = await link.read_json(posixpath.join(run_dir.path, name))
        if isinstance(saved, dict) and isinstance(saved.get("jobs"), list):
            return saved
    if not run_dir.has_state:
        raise RunDirError(f"{run_dir}: no queue_state.json here (is this an eq-tui run dir?)")
    raise RunDirError(f"{run_dir}: queue_state.json is unreadable")


async def _status(target: RemoteTarget, config_path: str | None
                  ) -> tuple[dict[str, Any], list[JobState]]:
    link = await open_link(target.host, config_path, read_from=str(target))
    try:
        located = await link.locate(target)
        client = await link.control(located)
        if client is not None:
            try:
                return from_snapshot(client.snapshot())
            finally:
                await client.close()
        saved = await saved_state(link, located)
        return saved, jobs_from_state(saved, f"{located}/queue_state.json")
    finally:
        await link.close()


async def _snapshot(target: RemoteTarget, config_path: str | None) -> Snapshot | None:
    link = await open_link(target.host, config_path, read_from=str(target))
    try:
        client = await link.control(await link.locate(target))
        if client is None:
            return None
        try:
            return client.snapshot()
        finally:
            await client.close()
    finally:
        await link.close()


def print_remote_status(target: RemoteTarget, *, as_json: bool = False,
                        config_path: str | None = None, each_job: bool = False,
                        gpus: bool = False) -> int:
    if gpus:  # who holds each GPU: only the running engine knows
        return show_gpus(asyncio.run(_snapshot(target, config_path)), as_json=as_json,
                         where=target.host)
    saved, jobs = asyncio.run(_status(target, config_path))
    return show_status(saved, jobs, as_json=as_json, where=target.host, each_job=each_job,
                       run_dir=str(target))


async def _stop(target: RemoteTarget, config_path: str | None) -> str:
    link = await open_link(target.host, config_path, read_from=str(target))
    try:
        located = await link.locate(target)
        client = await link.control(located)
        if client is None:
            raise RunDirError(f"no engine is running for {located}")
        try:
            with contextlib.suppress(ConnectionError):
                await client.command("shutdown")
        finally:
            await client.close()
        return str(located)
    finally:
        await link.close()


def stop_remote_engine(target: RemoteTarget, *, config_path: str | None = None) -> int:
    where = asyncio.run(_stop(target, config_path))
    print(f"eq-tui: asked the engine of {where} to stop; its jobs keep running")
    return 0
