"""Commands out: per-project sends whose every outcome ends as a notification, never a crash;
the confirmations that come first (kill, requeue of a running job, stop the engine)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from textual.app import App

from eq_tui.api.client import EngineClient
from eq_tui.api.commands import (
    Command,
    Kill,
    OnJobs,
    Pause,
    Requeue,
    Resume,
    Retry,
    Shutdown,
)
from eq_tui.tui.rows import split_row_key
from eq_tui.tui.run_view import RunView
from eq_tui.tui.screens.confirm import ConfirmScreen
from eq_tui.tui.wording import NAMES_IN_CONFIRM, kill_dialog, listed, requeue_dialog


class CommandSender:
    """Sends kill/retry/requeue/pause/resume/shutdown to the engine of each job's project."""

    def __init__(self, app: App[Any], clients: Mapping[str, EngineClient],
                 before_send: Callable[[], None] = lambda: None) -> None:
        self.app = app
        self.clients = clients
        self.before_send = before_send  # e.g. the table clears its marks

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        self.app.run_worker(work, group="commands", exit_on_error=False)

    async def send(self, make: Callable[[tuple[str, ...]], Command], keys: list[str]) -> None:
        """`make(job_ids)`: the command for one project's jobs among `keys`."""
        by_project: dict[str, list[str]] = {}
        for key in keys:
            project, job_id = split_row_key(key)
            by_project.setdefault(project, []).append(job_id)
        notify = self.app.notify
        for project, job_ids in by_project.items():
            client = self.clients.get(project)
            if client is None:
                continue
            command = make(tuple(job_ids))
            name = command.name
            try:
                result = await client.send(command)
            except Exception as exc:
                notify(f"{name} failed: {exc}", severity="error")
                continue
            refused = {job: why for job, why in (result.get("results") or {}).items()
                       if why != "ok"}
            done = [job for job in job_ids if job not in refused]
            if done:
                notify(f"{name}: {listed(done)}")
            for job, why in list(refused.items())[:NAMES_IN_CONFIRM]:
                notify(f"{name} {job}: {why}", severity="warning")
            if result.get("error") and not refused:
                notify(f"{name}: {result['error']}", severity="warning")

    def send_soon(self, kind: type[OnJobs], keys: list[str]) -> None:
        """kill, retry, requeue, hold or release these jobs, in the background."""
        if not keys:
            self.app.notify("no job selected", severity="warning")
            return
        self.before_send()
        self._in_background(self.send(lambda ids: kind(job_ids=ids, by="ui"), keys))

    def request_kill(self, keys: list[str]) -> None:
        self.request_confirmed(Kill, keys, kill_dialog, "Kill")

    def request_requeue(self, keys: list[str]) -> None:
        """Requeue after a confirmation: it stops a running job, as a kill does."""
        self.request_confirmed(Requeue, keys, requeue_dialog, "Requeue")

    def request_confirmed(self, kind: type[OnJobs], keys: list[str],
                          dialog: Callable[[list[str]], tuple[str, str]], label: str) -> None:
        """`kind` on these jobs once the person says yes to `dialog(job ids)`."""
        if not keys:
            self.app.notify("no job selected", severity="warning")
            return
        title, message = dialog([split_row_key(k)[1] for k in keys])

        def answered(yes: bool | None) -> None:
            if yes:
                self.send_soon(kind, keys)

        self.app.push_screen(ConfirmScreen(title, message, confirm_label=label), answered)

    def retry_oom_stuck(self, view: RunView) -> None:
        """The palette's bulk retry: the stuck jobs whose last failure was a CUDA OOM."""
        keys = []
        for key in view.keys_with_status("stuck"):
            found = view.job(key)
            failure = (found[1].get("failure") or {}) if found else {}
            if failure.get("class") == "cuda_oom":
                keys.append(key)
        if not keys:
            self.app.notify("no job is stuck on a CUDA OOM")
            return
        self.send_soon(Retry, sorted(keys))

    def set_paused(self, paused: bool) -> None:
        command = Pause(by="ui") if paused else Resume(by="ui")

        async def send_all() -> None:
            for client in self.clients.values():
                try:
                    await client.send(command)
                except Exception as exc:
                    self.app.notify(f"{client.project}: {command.name} failed: {exc}",
                                    severity="error")
            self.app.notify("launching paused; running jobs keep running" if paused
                            else "launching resumed")

        self._in_background(send_all())

    def request_shutdown(self, message: str, stopped: Callable[[], None]) -> None:
        """Stop every engine after a confirmation; `stopped` runs once all have been told."""

        async def stop_all() -> None:
            for client in self.clients.values():
                try:
                    await client.send(Shutdown(by="ui"))
                except ConnectionError:
                    pass  # the engine closed the connection on its way out
                except Exception as exc:
                    self.app.notify(f"{client.project}: stop failed: {exc}", severity="error")
                    return
            stopped()

        def answered(yes: bool | None) -> None:
            if yes:
                self._in_background(stop_all())

        self.app.push_screen(ConfirmScreen("Stop the engine?", message, confirm_label="Stop"),
                             answered)
