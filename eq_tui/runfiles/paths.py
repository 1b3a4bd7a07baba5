"""Where a run dir lives and how one is recognised: the default run dir of a manifest
(`experiment_queue/<project>/` beside it), the files that mark a run dir, and the names
`--fresh` gives the run dirs it archives."""

from __future__ import annotations

import re
from pathlib import Path

QUEUE_DIR = "experiment_queue"
# any of these in a directory makes it a run dir (the engine writes the first two at start)
RUN_FILES = ("queue_state.json", "manifest.json", "results.jsonl", "events.jsonl")
# archive_run_dir's names: <run dir>.<YYYYmmdd-HHMMSS>[-N]
_ARCHIVED = re.compile(r".+\.\d{8}-\d{6}(-\d+)?")


def default_run_dir(manifest_path: str, project: str) -> Path:
    return Path(manifest_path).resolve().parent / QUEUE_DIR / project


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and any((path / name).exists() for name in RUN_FILES)


def is_archived(path: Path) -> bool:
    """A run dir `--fresh` moved aside (it keeps a finished run's files, not a run to act on)."""
    return _ARCHIVED.fullmatch(path.name) is not None


def runs_in(folder: Path) -> list[Path]:
    """The run dirs a folder holds: its own sub-folders that are run dirs, and those of its
    `experiment_queue/` (where a manifest beside them runs by default); archived ones left
    out, sorted by path."""
    found: set[Path] = set()
    for parent in (folder, folder / QUEUE_DIR):
        try:
            children = list(parent.iterdir()) if parent.is_dir() else []
        except OSError:
            continue
        found.update(child for child in children
                     if not is_archived(child) and is_run_dir(child))
    return sorted(found)
