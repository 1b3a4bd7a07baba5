"""`eq-tui attach RUN_DIR`: the full UI on an engine that is already running, through its
control socket. Quitting the UI detaches; the engine keeps scheduling."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from eq_tui.engine.control import ControlClient
from eq_tui.errors import RunDirError


def _resume_hint(run_dir: Path) -> str:
    try:
        source = json.loads((run_dir / "manifest.json").read_text())["source"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"start it again with `eq-tui MANIFEST --run-dir {run_dir}`"
    return (f"resume it with `eq-tui {source} --run-dir {run_dir}` "
            f"(add --detach to keep it in the background)")


async def _attach(run_dir: Path, theme: str | None) -> int:
    try:
        client = await ControlClient.connect(run_dir)
    except (OSError, ConnectionError, RuntimeError):
        if not (run_dir / "queue_state.json").exists():
            raise RunDirError(f"{run_dir} is not an eq-tui run dir") from None
        raise RunDirError(f"no engine is running for {run_dir}; {_resume_hint(run_dir)}") from None
    from eq_tui.tui.app import EqTuiApp

    app = EqTuiApp([client], theme=theme, detach_on_quit=True)
    try:
        await app.run_async()
    finally:
        await client.close()
    return 0


def attach(run_dir: Path, *, theme: str | None = None) -> int:
    return asyncio.run(_attach(run_dir, theme))
