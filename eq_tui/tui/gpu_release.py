"""The palette's entries for quarantined GPUs: one per GPU, releasing it (launching there
again) through its project's engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Protocol

from eq_tui.api.client import EngineClient
from eq_tui.api.commands import ReleaseGpu
from eq_tui.tui.run_view import RunView


class Releasing(Protocol):
    """What the palette entries need of the app (which they do not import)."""

    @property
    def view(self) -> RunView: ...

    @property
    def clients(self) -> Mapping[str, EngineClient]: ...

    def notify(self, message: str, *, severity: Any = ...) -> None: ...

    def run_worker(self, work: Any, *, group: str = ..., exit_on_error: bool = ...) -> Any: ...


def release_gpu_commands(app: Releasing) -> list[tuple[str, Callable[[], object], str]]:
    """(label, callback, help) for every quarantined GPU."""
    entries: list[tuple[str, Callable[[], object], str]] = []
    for project, view in app.view.projects.items():
        for host_name, host in view.hosts.items():
            for gpu in host.get("gpus") or []:
                if gpu.get("quarantined"):
                    target = f"{host_name}:{gpu.get('index')}"
                    label = f"Release GPU {target}" + (
                        f" ({project})" if len(app.view.projects) > 1 else "")
                    entries.append((label, partial(send_release, app, project, target),
                                    str(gpu.get("quarantine_reason") or "quarantined")))
    return entries


def send_release(app: Releasing, project: str, target: str) -> None:
    async def send() -> None:
        client = app.clients.get(project)
        if client is None:
            return
        answer = await client.send(ReleaseGpu(gpus=(target,), by="ui"))
        why = (answer.get("results") or {}).get(target, answer.get("error") or "")
        app.notify(f"GPU {target} released" if answer.get("ok") else f"{target}: {why}",
                   severity="information" if answer.get("ok") else "warning")

    app.run_worker(send(), group="commands", exit_on_error=False)
