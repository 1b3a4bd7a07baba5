"""The log tail of the selected job, following live; `[` and `]` step through its attempts. Its
lines come as a terminal shows them (hosts/term_lines.py): one per progress bar, the newest."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Log
from textual.worker import Worker

TailFetcher = Callable[[str, int | None], Awaitable[list[str]]]
MAX_LOG_LINES = 2000
TAIL_LINES = 200
POLL_S = 1.0


def sanitise(line: str) -> str:
    """Printable text only: a training log may carry escape codes or carriage returns."""
    return "".join(ch if ch.isprintable() or ch == "\t" else " " for ch in line.rstrip("\r\n"))


def lines_to_append(shown: Sequence[str], latest: Sequence[str]) -> list[str] | None:
    """The lines of `latest` not yet shown, when `latest` continues `shown`; None when the log
    must be redrawn (a different file, or more new lines than one tail holds)."""
    if not shown or not latest:
        return list(latest)
    if list(shown[-len(latest):]) == list(latest):
        return []
    longest = min(len(shown), len(latest))
    for size in range(longest, 0, -1):
        if list(shown[-size:]) == list(latest[:size]):
            return list(latest[size:])
    return None


class LogPane(Vertical, can_focus=False):
    """A bounded Log fed from `client.tail` for one job; polled in a worker, never blocking."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.key: str | None = None
        self.attempt: int | None = None  # None: follow the current attempt
        self.attempts = 0
        self.running = False  # the job's current attempt runs: its log is live
        self._fetch: TailFetcher | None = None
        self._shown: list[str] = []
        self._tail_worker: Worker[None] | None = None
        self._tailing: tuple[str, int | None] | None = None  # what that worker fetches
        # held, not queried: a timer may fire while the app is still mounting or tearing down
        self._log = Log(max_lines=MAX_LOG_LINES, auto_scroll=True, id="log")

    def compose(self) -> ComposeResult:
        yield self._log

    def on_mount(self) -> None:
        self.border_title = "log"
        self.set_interval(POLL_S, self.poll)

    @property
    def log_widget(self) -> Log:
        return self._log

    def follow(self, key: str | None, attempts: int, fetch: TailFetcher | None, *,
               running: bool = False) -> None:
        """Show another job (from its current attempt), or keep following the same one."""
        self.running = running
        if key == self.key:
            self.attempts = attempts
            self._title()
            return
        self.key, self.attempts, self._fetch, self.attempt = key, attempts, fetch, None
        self._reset()
        self.poll()

    def step_attempt(self, delta: int) -> None:
        if not self.attempts:
            return
        current = self.attempt or self.attempts
        chosen = max(1, min(self.attempts, current + delta))
        self.attempt = None if chosen == self.attempts else chosen
        self._reset()
        self.poll()

    def _reset(self) -> None:
        self._shown = []
        self.log_widget.clear()
        self._title()

    def _title(self) -> None:
        if self.key is None:
            self.border_title = "log"
            self.border_subtitle = ""
            return
        shown = self.attempt or self.attempts
        live = " (live)" if self.attempt is None and self.running else ""
        self.border_title = f"log: {self.key.partition('/')[2]} attempt {shown}/{self.attempts}" \
            f"{live}" if self.attempts else f"log: {self.key.partition('/')[2]} (not started)"
        self.border_subtitle = "[ earlier  ] later" if self.attempts > 1 else ""

    def poll(self) -> None:
        if self.key is None or self._fetch is None or not self.attempts:
            return
        key, attempt = self.key, self.attempt
        worker = self._tail_worker
        if worker is not None and not worker.is_finished and self._tailing == (key, attempt):
            return  # a slow tail finishes: restarting it every second would never show one
        self._tailing = (key, attempt)

        async def refresh() -> None:  # created lazily: a cancelled worker leaves no coroutine
            await self._refresh(key, attempt)

        self._tail_worker = self.run_worker(refresh, group="tail", exclusive=True,
                                            exit_on_error=False)

    async def _refresh(self, key: str, attempt: int | None) -> None:
        assert self._fetch is not None
        try:
            lines = [sanitise(line) for line in await self._fetch(key, attempt)]
        except Exception as exc:  # a host hiccup shows in the pane, not as a crash
            lines = [f"[eq-tui] log unavailable: {exc}"]
        if key != self.key or attempt != self.attempt:
            return  # the selection moved on while we waited
        new = lines_to_append(self._shown, lines)
        log = self.log_widget
        if new is None:
            log.clear()
            self._shown = []
            new = lines
        if new:
            log.write_lines(new)
            self._shown = (self._shown + new)[-TAIL_LINES * 2:]
