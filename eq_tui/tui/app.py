"""The full-screen UI: renders engine events, sends commands; no scheduling logic here."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, ClassVar

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.events import Resize
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.theme import Theme

from eq_tui.api.client import EngineClient
from eq_tui.api.events import Event
from eq_tui.tui.command_targets import targets
from eq_tui.tui.config import save_setting
from eq_tui.tui.filter_bar import FilterBar
from eq_tui.tui.gpu_grid import GpuGrid
from eq_tui.tui.gpu_release import release_gpu_commands
from eq_tui.tui.header import RunHeader, with_queue_reason
from eq_tui.tui.host_drain import DrainKey
from eq_tui.tui.job_line import JobLine
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.key_footer import KeyFooter
from eq_tui.tui.keys import MAIN_ONLY, bindings, palette_keys
from eq_tui.tui.layout import Room, room_for
from eq_tui.tui.living import LivingQueueActions
from eq_tui.tui.log_pane import TAIL_LINES, LogPane
from eq_tui.tui.retry_pane import RetryPane
from eq_tui.tui.rows import row_key, split_row_key
from eq_tui.tui.run_view import Changes, RunView, hosts_now
from eq_tui.tui.screens.confirm import ConfirmScreen
from eq_tui.tui.screens.details import JobDetailsScreen
from eq_tui.tui.screens.help import HelpScreen
from eq_tui.tui.screens.results import ResultsScreen
from eq_tui.tui.screens.summary import open_summary
from eq_tui.tui.sender import CommandSender
from eq_tui.tui.themes import choose_theme, load_themes, user_theme_dir
from eq_tui.tui.wording import quit_message

ALERT_SEVERITY: dict[str, SeverityLevel] = {"error": "error", "warning": "warning"}


class EqTuiApp(LivingQueueActions, DrainKey, App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "eq-tui"
    BINDINGS: ClassVar[list[BindingType]] = bindings()  # keys.py: every key, declared once
    SCREENS: ClassVar[dict[str, Any]] = {"results": ResultsScreen}  # R: one, kept while open

    def __init__(self, clients: list[EngineClient], *, theme: str | None = None,
                 clock: Callable[[], float] = time.time, detach_on_quit: bool = False,
                 attach_hint: str = "eq-tui attach RUN_DIR") -> None:
        super().__init__()
        self.clients: dict[str, EngineClient] = {client.project: client for client in clients}
        self.clock = clock
        self.detach_on_quit = detach_on_quit
        self.quit_chosen = False  # the person confirmed q: not an interruption
        self._followed_host: tuple[str | None, str | None] = (None, None)  # (job key, host)
        self.attach_hint = attach_hint
        self.engine_stopped = False
        self.engine_gone = ""
        self.view = RunView()
        self.room = Room()
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

    # ---- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield GpuGrid(id="gpus")
        yield FilterBar(id="filter")
        yield JobTable(id="jobs")
        yield JobLine(id="job-line")
        with Horizontal(id="bottom"):
            yield LogPane(id="log-pane")
            yield RetryPane(id="retry")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.table = self.query_one("#jobs", JobTable)
        self.job_line = self.query_one(JobLine)
        self.grid = self.query_one(GpuGrid)
        self.log_pane = self.query_one(LogPane)
        self.retry_pane = self.query_one(RetryPane)
        self.run_header = self.query_one(RunHeader)
        self.filter_bar = self.query_one(FilterBar)
        self.sender = CommandSender(self, self.clients, before_send=self.table.clear_marks)
        for client in self.clients.values():
            queue = client.subscribe()
            self._queues.append((client, queue))
            try:
                self.view.load_snapshot(client.snapshot())
            except Exception as exc:
                self.notify(f"{client.project}: could not read its state: {exc}",
                            severity="error")
        now = self.clock()
        self.table.setup(self.view, now)
        self.grid.show(self.view)
        self._lay_out()
        self.retry_pane.show(self.view, now)
        self.table.focus()
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

    def on_resize(self, event: Resize) -> None:
        if hasattr(self, "grid"):
            self._lay_out(event.size.width, event.size.height)

    def _lay_out(self, width: int = 0, height: int = 0) -> None:
        """Give each pane its share of the screen (see layout.room_for)."""
        if not width:
            width, height = self.room.size if self.room.size[0] else self.size
        self.room = room_for(width, height, self.room)
        room, screen = self.room, self.table.screen  # the main screen, under any dialog
        screen.set_class(room.small, "-small")
        screen.set_class(room.logs_tab, "-logs-tab")
        if room.small:
            screen.move_child(self.grid, after=self.job_line)
        else:
            screen.move_child(self.grid, before=self.filter_bar)
        bottom = screen.query_one("#bottom")
        bottom.display = room.bottom_height != 0
        bottom.styles.height = "1fr" if room.logs_tab else room.bottom_height
        self.table.display = self.grid.display = not room.logs_tab
        # a small screen has no log pane: the selected job's last line goes under the table
        self.job_line.display = room.small and not room.logs_tab
        self.run_header.compact = room.small
        self.run_header.screen_width = width
        self.table.fit_to(width)
        self.grid.fit_to(width, room.grid_budget, small=room.small)
        self.run_header.show(self.view, self.clock())

    def action_toggle_logs(self) -> None:
        """`l`: on a small screen the log and retry queue replace the table (and back);
        otherwise they hide to give the table their room (and come back)."""
        self.room = self.room.toggled_logs()
        self._lay_out()
        if self.room.logs_tab:
            self.retry_pane.focus()
        elif not self.table.has_focus:
            self.table.focus()

    def action_toggle_grid(self) -> None:
        form = self.grid.toggle_form()
        self.notify(f"GPU grid: {form} (g again: by the room)" if self.grid.force
                    else f"GPU grid: {form}, by the room")

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
                if self.log_pane.key in changes.jobs:
                    self._follow(self.log_pane.key)
                screen = self.screen
                if isinstance(screen, JobDetailsScreen) and screen.key in changes.jobs:
                    found = self.view.job(screen.key)
                    if found is not None:
                        screen.show_job(with_queue_reason(found[0], found[1]),
                                        self.view.pace(screen.key, now))
            if changes.hosts:
                self.grid.show(self.view, changes.hosts)
            if changes.header or changes.jobs or changes.alerts:
                self.run_header.show(self.view, now)
                self.retry_pane.show(self.view, now)
        for alert in changes.alerts:
            self.notify(str(alert.get("message", "")),
                        title=f"{alert.get('project', '')} {alert.get('level', '')}".strip(),
                        severity=ALERT_SEVERITY.get(str(alert.get("level")), "information"))
        return changes

    def _every_second(self) -> None:
        now = self.clock()
        with self.batch_update():
            self.table.apply(self.view.keys_with_status("running", "launching"), now)
            self.run_header.show(self.view, now)
            self.retry_pane.show(self.view, now)
            screen = self.screen
            if isinstance(screen, JobDetailsScreen) and screen.pace is not None:
                screen.show_pace(self.view.pace(screen.key, now))

    # ---- selection, log and details ----------------------------------------------------------

    def on_job_table_job_highlighted(self, message: JobTable.JobHighlighted) -> None:
        self._follow(message.key)

    def _follow(self, key: str | None) -> None:
        found = self.view.job(key) if key else None
        attempts = len(found[1].get("history") or []) if found else 0
        running = found is not None and str(found[1].get("status")) in ("launching", "running")
        self.log_pane.follow(key if found else None, attempts, self.tail, running=running)
        self.job_line.show(found[1] if found else None, now=self.clock(),
                           max_attempts=found[0].max_attempts if found else 0)
        # the grid follows the job to its host when the highlight moves or the job moves host,
        # never on the job's other updates: the person may have picked another host since
        host = row_key(found[0].project, str(found[1]["host"])) if found and found[1].get(
            "host") else None
        if host is not None and (key, host) != self._followed_host:
            self.grid.select(host)
        self._followed_host = (key, host)

    async def tail(self, key: str, attempt: int | None) -> list[str]:
        project, job_id = split_row_key(key)
        client = self.clients.get(project)
        if client is None:
            return []
        return await client.tail(job_id, attempt, TAIL_LINES)

    def on_job_table_details_requested(self, message: JobTable.DetailsRequested) -> None:
        self.action_details(message.key)

    def action_details(self, key: str | None = None) -> None:
        """The details screen of `key`, else of the job under the table's cursor."""
        found = self.view.job(key or self.table.cursor_key or "")
        if found is None:
            return
        project, job = found
        key = row_key(project.project, str(job["id"]))
        pace = self.view.pace(key, self.clock())
        self.push_screen(JobDetailsScreen(key, with_queue_reason(project, job),
                                          max_attempts=project.max_attempts,
                                          fetch=self.tail, pace=pace,
                                          hosts=partial(hosts_now, self.view, project.project)))

    def action_attempt(self, delta: int) -> None:
        self.log_pane.step_attempt(delta)

    # ---- commands out (sender.py sends them) -------------------------------------------------

    def action_command(self, name: str) -> None:
        """k/r/u on the targets; the kill dialog leaves finished jobs out."""
        self.run_command(name, targets(self))

    def action_toggle_pause(self) -> None:
        self.sender.set_paused(not self.view.paused)

    def action_table(self, action: str) -> None:
        """The job table's own actions (mark, sort, metric), bound here with every other key
        (keys.py)."""
        getattr(self.table, f"action_{action}")()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The table's actions only while the main screen is on top (hidden elsewhere)."""
        return not (action in MAIN_ONLY and self.screen is not self.table.screen)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The palette (ctrl+p): Textual's own commands, then eq-tui's."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Retry every OOM-stuck job", "stuck jobs whose last failure was "
                            "a CUDA OOM go back to pending",
                            partial(self.sender.retry_oom_stuck, self.view))
        yield SystemCommand("Open summary", "summary.md of the run, if written",
                            partial(open_summary, self, self.view))
        yield SystemCommand("Reload the manifest", "read the manifest file again: shows what "
                            "changes, then asks", self.action_reload)
        yield SystemCommand("Resume launching" if self.view.paused else "Pause launching",
                            "launching only; running jobs are untouched",
                            self.action_toggle_pause)
        yield SystemCommand("Stop the engine", "asks first; running jobs keep running in "
                            "their sessions", self.action_stop_engine)
        yield SystemCommand("Help", "every key", self.action_help)
        for label, help_text, action in palette_keys():
            yield SystemCommand(label, help_text, partial(self.run_action, action))
        for label, callback, help_text in release_gpu_commands(self):
            yield SystemCommand(label, help_text, callback)
        for name in sorted(self.available_themes):
            if name.startswith("eq-") or name in self.user_themes:
                yield SystemCommand(f"Switch theme: {name}", "remembered for the next start",
                                    partial(setattr, self, "theme", name))

    # ---- filter, help, summary, theme, quit ----------------------------------------------------

    def action_filter(self) -> None:
        self.filter_bar.open()

    def on_filter_bar_applied(self, message: FilterBar.Applied) -> None:
        self.table.set_filter(message.job_filter, message.text if message.kept else None)
        self.grid.set_host_filter(message.job_filter.fields.get("host", frozenset()))
        if message.kept:
            self.table.focus()

    def action_clear(self) -> None:
        if not self.filter_bar.close():
            self.table.clear_marks()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

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

        def stopped() -> None:
            self.engine_stopped = True
            self.quit_chosen = True
            self.exit(0)

        self.sender.request_shutdown(message, stopped)

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
