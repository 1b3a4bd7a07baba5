"""The one reading of RUN_DIR on the command line, for every command that takes one: a run dir,
the manifest that ran it (its default run dir, `experiment_queue/<project>/` beside it) or the
manifest's folder when that holds one run; HOST:RUN_DIR (a run dir on an ssh host) is left as
given (the caller tells it apart with remote.target.parse_target). One set of messages for
what it cannot resolve."""

from __future__ import annotations

import shlex
from pathlib import Path

from eq_tui.errors import ManifestError, RunDirError, UsageError

WHAT = "a run dir, the manifest that ran it, or that manifest's folder"


def resolve(text: str) -> Path:
    """The local run dir `text` names (see the module's doc); RunDirError (exit 3) when there is
    none, UsageError (exit 2) for a file that is no manifest eq-tui can read."""
    from eq_tui.runfiles.paths import is_run_dir, runs_in

    if "\0" in text:
        raise UsageError(f"{text!r}: a path cannot contain a NUL byte")
    path = Path(text)
    if is_run_dir(path):
        return path
    if path.is_file():
        return _of_manifest(text)
    if not path.exists():
        raise RunDirError(f"{text}: no such file or directory (give {WHAT})")
    if not path.is_dir():
        raise RunDirError(f"{text}: not {WHAT}")
    runs = runs_in(path)
    if len(runs) == 1:
        return runs[0]
    if not runs:
        raise RunDirError(f"{text}: no eq-tui run here (give {WHAT}; a run dir holds "
                          "queue_state.json)")
    listed = "\n".join(f"  {shlex.quote(str(run))}" for run in runs)
    raise RunDirError(f"{text} holds {len(runs)} runs; name one of them:\n{listed}")


def _of_manifest(text: str) -> Path:
    from eq_tui.manifest.loader import load_manifest
    from eq_tui.runfiles.paths import default_run_dir, is_run_dir

    try:
        manifest = load_manifest(text)
    except ManifestError as exc:
        raise UsageError(f"{text} is not a run dir, and not a manifest eq-tui can read: "
                         f"{exc}") from None
    run_dir = default_run_dir(manifest.source, manifest.project)
    if is_run_dir(run_dir):
        return _shortest(run_dir)
    raise RunDirError(f"{text} has not run yet (no run dir {_shortest(run_dir)}); "
                      f"`eq-tui {shlex.quote(text)}` runs it (a run elsewhere, made with "
                      "--run-dir: give that dir)")


def _shortest(path: Path) -> Path:
    """`path` relative to the working directory when it lies under it (what a user typed
    reads back), else absolute."""
    try:
        return path.relative_to(Path.cwd().resolve())
    except ValueError:
        return path
