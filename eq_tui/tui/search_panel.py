"""The results screen's search panel: for a run with a search (its `<run dir>/optuna.journal`),
each study's trials by state, best trial and parameters, its trials' values in the order told
with the best so far, and which parameters mattered — what `eq-tui results` prints below its
table (runfiles/search_summary.py).

Loading a study reads the whole journal and imports Optuna: both run in a worker thread, never
in the event loop, and only when a journal changed (its size or time). Without Optuna the panel
says how to install it. A run dir that is not on this machine (an engine over ssh) has no
journal here: no panel.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from pathlib import Path

from rich.text import Text
from textual.widgets import Static

from eq_tui.runfiles.search_study import journal_path
from eq_tui.runfiles.search_summary import optuna_missing, read_searches

Seen = tuple[tuple[str, int, int], ...]  # per journal: its path, size and time


def journals_seen(run_dirs: Iterable[str]) -> Seen:
    seen = []
    for run_dir in run_dirs:
        if not run_dir:
            continue
        try:
            stat = os.stat(journal_path(Path(run_dir)))
        except OSError:
            continue
        seen.append((run_dir, stat.st_size, stat.st_mtime_ns))
    return tuple(seen)


def searches_text(run_dirs: dict[str, str]) -> str:
    """Per project (name -> run dir), what its searches say; "" for none. Blocks: a thread's."""
    parts = []
    several = len(run_dirs) > 1
    for project, run_dir in run_dirs.items():
        if not run_dir:
            continue
        path = Path(run_dir)
        said = optuna_missing(path) or "\n".join(study.text() for study in read_searches(path))
        if said:
            parts.append(f"{project}: {said}" if several else said)
    return "\n".join(part.rstrip("\n") for part in parts)


class SearchPanel(Static):
    DEFAULT_CSS = """
    SearchPanel { height: auto; max-height: 50%; padding: 0 1; border-top: solid $primary; }
    """

    def __init__(self) -> None:
        super().__init__(id="results-search")
        self.display = False
        self._seen: Seen = ()
        self.loaded = False  # the first load has ended (whether or not it found a search)

    def follow(self, run_dirs: dict[str, str]) -> None:
        """Reload when a journal appeared, changed or went (a stat each: cheap)."""
        seen = journals_seen(run_dirs.values())
        if seen == self._seen and self.loaded:
            return
        self._seen = seen
        if not seen:
            self._show("")
            return
        self.run_worker(self._load(run_dirs), group="search", exclusive=True,
                        exit_on_error=False)

    async def _load(self, run_dirs: dict[str, str]) -> None:
        try:
            text = await asyncio.to_thread(searches_text, dict(run_dirs))
        except Exception as exc:  # a journal Optuna cannot read: say so, keep the screen
            text = f"the search's journal could not be read: {exc}"
        self._show(text)

    def _show(self, text: str) -> None:
        self.update(Text(text))
        self.display = bool(text)
        self.loaded = True
