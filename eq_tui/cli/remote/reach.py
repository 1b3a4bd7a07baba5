"""A control client of the engine of a run dir, here or on an SSH host (HOST:RUN_DIR): what the
shell verbs (kill, edit, reload, ...) send their command through."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from eq_tui.api.control_client import ControlClient, find_socket
from eq_tui.cli.remote.target import parse_target
from eq_tui.errors import RunDirError

CONNECT_TIMEOUT_S = 15.0


class NoEngine(RunDirError):
    """No engine answers for that run dir (exit 3)."""


async def _local(run_dir: Path) -> ControlClient:
    if "\0" in str(run_dir) or not run_dir.is_dir():
        raise NoEngine(f"{run_dir}: no such run dir here")
    if find_socket(run_dir) is None:
        raise NoEngine(f"no engine is running for {run_dir}")
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            return await ControlClient.connect(run_dir)
    except (OSError, ConnectionError, RuntimeError, TimeoutError) as exc:
        raise NoEngine(f"no engine answers for {run_dir} ({exc})") from None


@contextlib.asynccontextmanager
async def reach(where: str, config_path: str | None) -> AsyncIterator[ControlClient]:
    """The engine's client for `where` (a run dir, or HOST:RUN_DIR), closed on the way out."""
    target = parse_target(where)
    if target is None:
        client = await _local(Path(where))
        try:
            yield client
        finally:
            await client.close()
        return
    from eq_tui.cli.remote.link import open_link

    link = await open_link(target.host, config_path, read_from=where)
    try:
        located = await link.locate(target)
        remote = await link.control(located)
        if remote is None:
            raise NoEngine(f"no engine is running for {located}")
        try:
            yield remote
        finally:
            await remote.close()
    finally:
        await link.close()
