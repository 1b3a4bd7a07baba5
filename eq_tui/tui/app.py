"""The full-screen UI: renders engine events, sends commands; no scheduling logic here."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.notifications import SeverityLevel
from textual.theme import Theme
from textual.widgets import Footer, Input

from eq_tui.engine.client import EngineClient
from eq_tui.engine.events import Event
from eq_tui.tui.commands import EqCommands
from eq_tui.tui.config import save_setting
from eq_tui.tui.filters import parse_filter
from eq_tui.tui.gpu_grid import GpuGrid
from eq_tui.tui.header import RunHeader
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.living import LIVING_BINDINGS, LivingQueueActions
from eq_tui.tui.log_pane import TAIL_LINES, LogPane
from eq_tui.tui.retry_pane import RetryPane
from eq_tui.tui.rows import split_row_key
from eq_tui.tui.run_view import Changes, RunView
from eq_tui.tui.screens.confirm import ConfirmScreen
from eq_tui.tui.screens.details import JobDetailsScreen
from eq_tui.tui.screens.help import HelpScreen
from eq_tui.tui.screens.results import ResultsScreen
from eq_tui.tui.screens.summary import SummaryScreen
from eq_tui.tui.themes import choose_theme, load_themes, user_theme_dir
from eq_tui.tui.wording import NAMES_IN_CONFIRM, kill_dialog, quit_message

ALERT_SEVERITY: dict[str, SeverityLevel] = {"error": "error", "warning": "warning"}
FILTER_DEBOUNCE_S = 0.15


class EqTuiApp(LivingQueueActions, App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "eq-tui"
    COMMANDS = App.COMMANDS | {EqCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("k", "kill", "Kill"),
        Binding("r", "retry", "Retry"),
        Binding("u", "requeue", "Requeue"),
        Binding("p", "toggle_pause", "Pause/resume"),
        Binding("enter", "details", "Details"),
        Binding("slash", "filter", "Filter"),
        Binding("left_square_bracket", "attempt(-1)", "Earlier log", show=False),
        Binding("right_square_bracket", "attempt(1)", "Later log", show=False),
        Binding("escape", "clear", "Clear marks/filter", show=False),
        Binding("R", "push_screen('results')", "Results", show=False),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit_app", "Quit"),
        *LIVING_BINDINGS,
    ]
    SCREENS: ClassVar[dict[str, Any]] = {"results": ResultsScreen}  # R: one, kept while open

    def __init__(self, clients: list[EngineClient], *, theme: str | None = None,
                 clock: Callable[[], float] = time.time, detach_on_quit: bool = False,
                 attach_hint: str = "eq-tui attach RUN_DIR") -> None:
        super().__init__()
        self.clients: dict[str, EngineClient] = {client.project: client for client in clients}
        self.clock = clock
        self.detach_on_quit = detach_on_quit
        self.quit_chosen = False  # the person confirmed q: not an interruption
        self.attach_hint = attach_hint
        self.engine_stopped = False
        self.engine_gone = ""
        self.view = RunView()
        catalog = load_themes()
        self.user_themes = set(load_themes([user_theme_dir()]).themes)
        for found in catalog.themes.values():
            self.register_theme(found)
        self._theme_problems = catalog.problems
        chosen, problem = choose_theme(theme, set(self.available_themes))
        if problem:
            self._theme_problems.append(problem)
        self.theme = chosen
        self._queues: list[tuple[EngineClient, asyncio.Queue[Event]]] = []
        self._filter_timer: Any = None

    # ---- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield GpuGrid(id="gpus")
        yield Input(placeholder="filter: words, status:stuck host:box1 phase:distill "
                    "(enter to keep, escape to clear)", id="filter")
        yield JobTable(id="jobs")
        with Horizontal(id="bottom"):
            yield LogPane(id="log-pane")
            yield RetryPane(id="retry")
        yield Footer()

    def on_mount(self) -> None:
        self.table = self.query_one("#jobs", JobTable)
        self.grid = self.query_one(GpuGrid)
        self.log_pane = self.query_one(LogPane)
        self.retry_pane = self.query_one(RetryPane)
        self.run_header = self.query_one(RunHeader)
        self.filter_box = self.query_one("#filter", Input)
        for client in self.clients.values():
            queue = client.subscribe()
            self._queues.append((client, queue))
            try:
                self.view.load_snapshot(client.snapshot())
            except Exception as exc:
                self.notify(f"{client.project}: could not read its state: {exc}",
                            severity="error")
        now = self.clock()
        self.filter_box.display = False
        self.table.setup(self.view, now)
        self.grid.show(self.view)
        self._redraw_summaries(now)
        self.table.focus()
        self.table.border_title = "jobs"
        for client, queue in self._queues:
            self.run_worker(self._pump(client, queue), group="events",
                            exit_on_error=False)
        self.set_interval(1.0, self._every_second)
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        for problem in self._theme_problems:
            self.notify(problem, severity="warning")

    def on_unmount(self) -> None:
        for client, queue in self._queues:
            client.unsubscribe(queue)

    # ---- events in -------------------------------------------------------------------------

    async def _pump(self, client: EngineClient, queue: asyncio.Queue[Event]) -> None:
        while True:
            batch = [await queue.get()]
            while not queue.empty():
                batch.append(queue.get_nowait())
            try:
                self.apply_events(batch)
            except Exception as exc:  # a rendering bug must not stop the event stream
                self.notify(f"{client.project}: could not show an update: {exc!r}",
                            severity="error")

    def apply_events(self, events: Iterable[Event]) -> Changes:
        """Fold a batch of events into the view and redraw only what they changed."""
        changes = Changes()
        for event in events:
            changes.merge(self.view.apply(event))
        if changes.empty:
            return changes
        now = self.clock()
        with self.batch_update():
            if changes.jobs:
                self.table.apply(changes.jobs, now)
                self._follow_selected(changes.jobs)
                self._refresh_details(changes.jobs)
            if changes.hosts:
                self.grid.show(self.view, changes.hosts)
            if changes.header or changes.jobs or changes.alerts:
                self._redraw_summaries(now)
        for alert in changes.alerts:
            self.notify(str(alert.get("message", "")),
                        title=f"{alert.get('project', '')} {alert.get('level', '')}".strip(),
                        severity=ALERT_SEVERITY.get(str(alert.get("level")), "information"))
        return changes

    def _every_second(self) -> None:
        now = self.clock()
        with self.batch_update():
            self.table.apply(self.view.keys_with_status("running", "launching"), now)
            self._redraw_summaries(now)

    def _redraw_summaries(self, now: float) -> None:
        self.run_header.show(self.view, now)
        self.retry_pane.show(self.view, now)

    # ---- selection, log and details ----------------------------------------------------------

    def on_job_table_job_highlighted(self, message: JobTable.JobHighlighted) -> None:
        self._follow(message.key)

    def _follow(self, key: str | None) -> None:
        found = self.view.job(key) if key else None
        attempts = len(found[1].get("history") or []) if found else 0
        running = found is not None and str(found[1].get("status")) in ("launching", "running")
        self.log_pane.follow(key if found else None, attempts, self.tail, running=running)

    def _follow_selected(self, keys: set[str]) -> None:
        selected = self.log_pane.key
        if selected in keys:
            self._follow(selected)

    def _refresh_details(self, keys: set[str]) -> None:
        screen = self.screen
        if isinstance(screen, JobDetailsScreen) and screen.key in keys:
            found = self.view.job(screen.key)
            if found is not None:
                screen.show_job(found[1])

    async def tail(self, key: str, attempt: int | None) -> list[str]:
        project, job_id = split_row_key(key)
        client = self.clients.get(project)
        if client is None:
            return []
        return await client.tail(job_id, attempt, TAIL_LINES)

    def on_job_table_details_requested(self, message: JobTable.DetailsRequested) -> None:
        self.open_details(message.key)

    def action_details(self) -> None:
        key = self.table.cursor_key
        if key:
            self.open_details(key)

    def open_details(self, key: str) -> None:
        found = self.view.job(key)
        if found is None:
            return
        project, job = found
        self.push_screen(JobDetailsScreen(key, job, max_attempts=project.max_attempts,
                                          fetch=self.tail))

    def action_attempt(self, delta: int) -> None:
        self.log_pane.step_attempt(delta)

    # ---- commands out ------------------------------------------------------------------------

    async def send(self, name: str, keys: list[str], args: dict[str, Any] | None = None) -> None:
        """Send a command per project; every outcome ends as a notification, never a crash."""
        by_project: dict[str, list[str]] = {}
        for key in keys:
            project, job_id = split_row_key(key)
            by_project.setdefault(project, []).append(job_id)
        for project, job_ids in by_project.items():
            client = self.clients.get(project)
            if client is None:
                continue
            try:
                result = await client.command(name, job_ids, args)
            except Exception as exc:
                self.notify(f"{name} failed: {exc}", severity="error")
                continue
            refused = {job: why for job, why in (result.get("results") or {}).items()
                       if why != "ok"}
            done = [job for job in job_ids if job not in refused]
            if done:
                self.notify(f"{name}: {', '.join(done[:NAMES_IN_CONFIRM])}"
                            + (f" and {len(done) - NAMES_IN_CONFIRM} more"
                               if len(done) > NAMES_IN_CONFIRM else ""))
            for job, why in list(refused.items())[:NAMES_IN_CONFIRM]:
                self.notify(f"{name} {job}: {why}", severity="warning")
            if result.get("error") and not refused:
                self.notify(f"{name}: {result['error']}", severity="warning")

    def _send_soon(self, name: str, keys: list[str]) -> None:
        if not keys:
            self.notify("no job selected", severity="warning")
            return
        self.table.clear_marks()
        self.run_worker(self.send(name, keys), group="commands", exit_on_error=False)

    def request_kill(self, keys: list[str]) -> None:
        if not keys:
            self.notify("no job selected", severity="warning")
            return
        if not (keys := self.killable(keys)):
            return
        title, message = kill_dialog([split_row_key(k)[1] for k in keys])

        def answered(yes: bool | None) -> None:
            if yes:
                self._send_soon("kill", keys)

        self.push_screen(ConfirmScreen(title, message, confirm_label="Kill"), answered)

    def targets(self) -> list[str]:
        """The job shown in a details screen, else the marked jobs or the table's cursor."""
        if isinstance(self.screen, JobDetailsScreen):
            return [self.screen.key]
        return self.table.targets()

    def action_kill(self) -> None:
        self.request_kill(self.targets())

    def action_retry(self) -> None:
        self._send_soon("retry", self.targets())

    def action_requeue(self) -> None:
        self._send_soon("requeue", self.targets())

    def on_job_table_kill_requested(self, message: JobTable.KillRequested) -> None:
        self.request_kill(message.keys)

    def on_job_table_retry_requested(self, message: JobTable.RetryRequested) -> None:
        self._send_soon("retry", message.keys)

    def on_job_table_requeue_requested(self, message: JobTable.RequeueRequested) -> None:
        self._send_soon("requeue", message.keys)

    def action_toggle_pause(self) -> None:
        name = "resume" if self.view.paused else "pause"

        async def send_all() -> None:
            for client in self.clients.values():
                try:
                    await client.command(name)
                except Exception as exc:
                    self.notify(f"{client.project}: {name} failed: {exc}", severity="error")
            self.notify("launching paused; running jobs keep running" if name == "pause"
                        else "launching resumed")

        self.run_worker(send_all(), group="commands", exit_on_error=False)

    def action_retry_oom_stuck(self) -> None:
        keys = []
        for key in self.view.keys_with_status("stuck"):
            found = self.view.job(key)
            failure = (found[1].get("failure") or {}) if found else {}
            if failure.get("class") == "cuda_oom":
                keys.append(key)
        if not keys:
            self.notify("no job is stuck on a CUDA OOM")
            return
        self._send_soon("retry", sorted(keys))

    # ---- filter, help, summary, theme, quit ----------------------------------------------------

    def action_filter(self) -> None:
        box = self.filter_box
        box.display = True
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "filter":
            return
        if self._filter_timer is not None:
            self._filter_timer.stop()
        query = event.value
        self._filter_timer = self.set_timer(
            FILTER_DEBOUNCE_S, lambda: self.table.set_filter(parse_filter(query)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "filter":
            return
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self.table.set_filter(parse_filter(event.value))
        if not event.value:
            event.input.display = False
        self.table.border_title = f"jobs (filter: {event.value})" if event.value else "jobs"
        self.table.focus()

    def action_clear(self) -> None:
        box = self.filter_box
        if box.display:
            if self._filter_timer is not None:
                self._filter_timer.stop()
            box.value = ""
            box.display = False
            self.table.set_filter(parse_filter(""))
            self.table.border_title = "jobs"
            self.table.focus()
        else:
            self.table.clear_marks()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_open_summary(self) -> None:
        parts = []
        for project in self.view.projects.values():
            path = Path(project.run_dir) / "summary.md" if project.run_dir else None
            if path is not None and path.is_file():
                try:
                    parts.append(path.read_text(encoding="utf-8"))
                except OSError as exc:
                    self.notify(f"{path}: {exc}", severity="error")
        if not parts:
            self.notify("no summary yet: summary.md is written when the queue finishes")
            return
        self.push_screen(SummaryScreen("summary", "\n\n".join(parts)))

    def switch_theme(self, name: str) -> None:
        self.theme = name

    def _theme_changed(self, theme: Theme) -> None:
        save_setting("theme", theme.name)
        table = self.table
        table.refresh_styles()
        table.rebuild(self.clock())

    def action_stop_engine(self) -> None:
        """Stop the engine(s) after a confirmation; jobs keep running in their sessions."""
        if self.detach_on_quit:
            message = ("The engine stops scheduling and exits (other attached UIs are told "
                       "so). Running jobs keep running in their sessions; start the engine "
                       "again to resume them.")
        else:
            message = ("The engine stops scheduling and eq-tui exits. Running jobs keep "
                       "running in their sessions; run the same command again to resume.")

        async def stop_all() -> None:
            for client in self.clients.values():
                try:
                    await client.command("shutdown")
                except ConnectionError:
                    pass  # the engine closed the connection on its way out
                except Exception as exc:
                    self.notify(f"{client.project}: stop failed: {exc}", severity="error")
                    return
            self.engine_stopped = True
            self.quit_chosen = True
            self.exit(0)

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(stop_all(), group="commands", exit_on_error=False)

        self.push_screen(ConfirmScreen("Stop the engine?", message, confirm_label="Stop"),
                         answered)

    def show_engine_gone(self, message: str, *, finished: bool) -> None:
        """An attached engine has exited or become unreachable: say so, keep the last state on
        screen, and let q leave without asking."""
        self.engine_gone = message
        self.sub_title = "engine exited" if finished else "engine unreachable"
        self.notify(message, severity="information" if finished else "error", timeout=3600)

    def action_quit_app(self) -> None:
        if self.engine_gone:
            self.exit(0)
            return
        message = quit_message(detach=self.detach_on_quit, attach_hint=self.attach_hint,
                               finished=bool(self.view.projects) and all(
                                   p.finished for p in self.view.projects.values()))

        def answered(yes: bool | None) -> None:
            if yes:
                self.quit_chosen = True
                self.exit(0)

        self.push_screen(ConfirmScreen("Quit eq-tui?", message, confirm_label="Quit"),
                         answered)
