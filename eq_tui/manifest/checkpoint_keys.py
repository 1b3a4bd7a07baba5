"""The `checkpoint:` key (top level, phase or job; the nearest wins): where a job saves its
checkpoints and how it resumes from one.

    checkpoint: {path: "ckpt/${id}/*.pt", resume: "--resume {checkpoint}", signal: USR1,
                 grace: 60}

`signal` and `grace` say how the job is stopped when it is preempted or drained `--now`: that
signal first (a real signal name), SIGKILL once the grace has run out.

Checked where it is written (its keys, `{checkpoint}` in `resume`) and again for each job once
its variables are known: the rendered path is a glob relative to the job's working directory
that stays inside that directory's tree and holds no shell syntax (the host expands it as a
glob and nothing else)."""

from __future__ import annotations

import re
import signal as signals
from dataclasses import dataclass
from typing import Any

from eq_tui.manifest import json_schema
from eq_tui.manifest.schema import Context
from eq_tui.manifest.yaml_lines import Path_

DEFAULT_SIGNAL = "TERM"
DEFAULT_GRACE_S = 60.0
MAX_GRACE_S = 86400.0  # hosts/base.py's bound on a stop's grace

CHECKPOINT_KEYS = json_schema.keys("checkpoint")
PLACEHOLDER = "{checkpoint}"
# what a rendered path may hold: a file name's usual characters, '/' and the glob's * ? [ ]
_SAFE_PATH = re.compile(r"[A-Za-z0-9_.,+=@%/*?\[\]-]+")


@dataclass(frozen=True)
class CheckpointAt:
    """A scope's or a job's contract as written (its `${var}` not yet rendered), and where."""

    path: str
    resume: str
    where: Path_
    signal: str = DEFAULT_SIGNAL
    grace: float = DEFAULT_GRACE_S


def parse_checkpoint(ctx: Context, raw: dict[str, Any], path: Path_,
                     inherited: CheckpointAt | None) -> CheckpointAt | None:
    if raw.get("checkpoint") is None:
        return inherited
    where: Path_ = (*path, "checkpoint")
    entry = ctx.mapping(raw["checkpoint"], where)
    ctx.check_keys(entry, CHECKPOINT_KEYS, where)
    for key, example in (("path", "ckpt/${id}/*.pt"), ("resume", "--resume {checkpoint}")):
        if entry.get(key) is None:
            ctx.fail(f"needs '{key}' (for example {key}: {example!r})", where)
    glob = ctx.string(entry["path"], (*where, "path"))
    resume = ctx.string(entry["resume"], (*where, "resume"))
    if PLACEHOLDER not in resume:
        ctx.fail(f"must say where the checkpoint's path goes with {PLACEHOLDER}, e.g. "
                 f"'--resume {PLACEHOLDER}', got {resume!r}", (*where, "resume"))
    return CheckpointAt(glob, resume, where, _signal(ctx, entry.get("signal"), where),
                        _grace(ctx, entry.get("grace"), where))


def _signal(ctx: Context, raw: Any, where: Path_) -> str:
    if raw is None:
        return DEFAULT_SIGNAL
    text = ctx.string(raw, (*where, "signal"))
    name = text.strip().upper().removeprefix("SIG")
    if name in ("KILL", "STOP") or not isinstance(getattr(signals, f"SIG{name}", None),
                                                  signals.Signals):
        ctx.fail(f"{text!r} is not a signal a job can catch to save its checkpoint (for "
                 f"example TERM, USR1, USR2, INT)", (*where, "signal"))
    return name


def _grace(ctx: Context, raw: Any, where: Path_) -> float:
    if raw is None:
        return DEFAULT_GRACE_S
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw <= MAX_GRACE_S:
        ctx.fail(f"must be 0 to {MAX_GRACE_S:g} seconds, not {raw!r}", (*where, "grace"))
    return float(raw)


def check_rendered_path(ctx: Context, glob: str, where: Path_, job_id: str) -> None:
    """The path as the job's host will expand it: relative, inside the job's directory tree,
    no shell syntax."""
    if glob.startswith(("/", "~")):
        ctx.fail(f"job {job_id!r}: checkpoint path {glob!r} must be relative to the job's "
                 f"working directory", where)
    if ".." in glob.split("/"):
        ctx.fail(f"job {job_id!r}: checkpoint path {glob!r} may not leave the job's "
                 f"directory tree ('..')", where)
    if not _SAFE_PATH.fullmatch(glob):
        bad = "".join(sorted({ch for ch in glob if not _SAFE_PATH.fullmatch(ch)}))
        ctx.fail(f"job {job_id!r}: checkpoint path {glob!r} holds {bad!r}: only letters, "
                 f"digits, '_.,+=@%-', '/' and the glob's '*', '?', '[ ]' (no blanks or shell "
                 f"syntax)", where)
