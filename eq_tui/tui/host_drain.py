"""`d` on the GPU grid's selected host: drain it (nothing new launches there; its jobs run on),
or give a drained host back — after a confirmation, through its project's engine, as `eq-tui
drain` / `eq-tui undrain` do. Stopping its jobs at once (`--now`) is left to the shell verb: a
key should not end jobs by surprise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from textual.app import App

from eq_tui.api.client import EngineClient
from eq_tui.api.commands import Command, Drain, Undrain
from eq_tui.tui.gpu_grid import GpuGrid
from eq_tui.tui.screens.confirm import ConfirmScreen


class DrainKey:
    """Mixed into EqTuiApp: the action of `d` (keys.py)."""

    clients: Mapping[str, EngineClient]

    def action_drain_host(self) -> None:
        """The GPU grid's selected host drained, or given back (asks first)."""
        app = cast("App[Any]", self)
        chosen = app.query_one(GpuGrid).selected_host()
        if chosen is not None:
            ask_drain(app, self.clients, *chosen)


def drain_dialog(host: str, drained: bool) -> tuple[str, str, str]:
    """(title, message, confirm label) of the question `d` asks."""
    if drained:
        return (f"Give {host} back?", f"Jobs launch on {host} again.", "Undrain")
    return (f"Drain {host}?", f"Nothing new launches on {host} from now on; the jobs running "
            f"there go on (`eq-tui drain RUN_DIR {host} --now` stops them to resume "
            "elsewhere). `d` again gives it back.", "Drain")


def ask_drain(app: App[Any], clients: Mapping[str, EngineClient], project: str, host: str,
              drained: bool) -> None:
    """Drain (or, `drained`, undrain) `host` of `project` once the person says yes."""
    title, message, label = drain_dialog(host, drained)
    command: Command = Undrain(host=host, by="ui") if drained else Drain(host=host, by="ui")

    async def send() -> None:
        client = clients.get(project)
        if client is None:
            return
        answer = await client.send(command)
        outcome = (answer.get("results") or {}).get(host, answer.get("error") or "")
        done = f"{host} given back" if drained else f"{host} drained"
        app.notify(done if answer.get("ok") else f"{host}: {outcome}",
                   severity="information" if answer.get("ok") else "warning")

    def answered(yes: bool | None) -> None:
        if yes:
            app.run_worker(send(), group="commands", exit_on_error=False)

    app.push_screen(ConfirmScreen(title, message, confirm_label=label), answered)
