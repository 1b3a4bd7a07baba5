"""The command palette's eq-tui commands (ctrl+p): theme, bulk retry, summary, pause, stop,
releasing a quarantined GPU."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from eq_tui.tui.app import EqTuiApp


class EqCommands(Provider):
    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        app = cast("EqTuiApp", self.app)
        pause = ("Resume launching" if app.view.paused else "Pause launching")
        commands: list[tuple[str, Callable[[], object], str]] = [
            ("Retry every OOM-stuck job", app.action_retry_oom_stuck,
             "stuck jobs whose last failure was a CUDA OOM go back to pending"),
            ("Open summary", app.action_open_summary, "summary.md of the run, if written"),
            ("Reload the manifest", app.action_reload,
             "read the manifest file again: shows what changes, then asks"),
            (pause, app.action_toggle_pause, "launching only; running jobs are untouched"),
            ("Stop the engine", app.action_stop_engine,
             "asks first; running jobs keep running in their sessions"),
            ("Help", app.action_help, "every key"),
        ]
        commands += release_gpu_commands(app)
        for name in sorted(app.available_themes):
            if name.startswith("eq-") or name in app.user_themes:
                commands.append((f"Switch theme: {name}", partial(app.switch_theme, name),
                                 "remembered for the next start"))
        return commands

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)


def release_gpu_commands(app: EqTuiApp) -> list[tuple[str, Callable[[], object], str]]:
    """One entry per quarantined GPU: release it (launching there again)."""
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


def send_release(app: EqTuiApp, project: str, target: str) -> None:
    async def send() -> None:
        client = app.clients.get(project)
        if client is None:
            return
        answer = await client.command("release-gpu", [target])
        why = (answer.get("results") or {}).get(target, answer.get("error") or "")
        app.notify(f"GPU {target} released" if answer.get("ok") else f"{target}: {why}",
                   severity="information" if answer.get("ok") else "warning")

    app.run_worker(send(), group="commands", exit_on_error=False)
