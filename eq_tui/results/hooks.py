"""`on_complete`: a command run where the engine runs when a phase (or the queue) is done, with
EQ_RESULTS (results.jsonl), EQ_PHASE (empty for the queue's), EQ_RUN_DIR set. Its output goes
to hooks/<phase>.log in the run dir; how it ended becomes an alert — a failing hook never fails
the queue. A hook whose log exists has run (a resumed engine does not run it again)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

QUEUE = "_queue"  # the top level's hook: when every job is done
HOOKS_DIR = "hooks"
TAIL_BYTES = 300


@dataclass(frozen=True)
class HookOutcome:
    name: str
    code: int | None  # None: it could not start
    log: Path
    last_line: str
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.code == 0

    def message(self) -> str:
        what = "on_complete of the queue" if self.name == QUEUE else \
            f"on_complete of phase {self.name}"
        if self.code is None:
            return f"{what} could not start: {self.error}"
        said = f": {self.last_line}" if self.last_line else ""
        if self.code == 0:
            return f"{what} done (output in {self.log}){said}"
        return f"{what} failed with exit code {self.code} (output in {self.log}){said}"


def log_path(run_dir: Path, name: str) -> Path:
    return run_dir / HOOKS_DIR / f"{'queue' if name == QUEUE else name}.log"


def already_ran(run_dir: Path) -> set[str]:
    folder = run_dir / HOOKS_DIR
    if not folder.is_dir():
        return set()
    return {QUEUE if p.stem == "queue" else p.stem for p in folder.glob("*.log")}


async def run_hook(command: str, *, name: str, phase: str, run_dir: Path, results: Path,
                   cwd: Path) -> HookOutcome:
    log = log_path(run_dir, name)
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "EQ_RESULTS": str(results.resolve()), "EQ_PHASE": phase,
           "EQ_RUN_DIR": str(run_dir.resolve())}
    with open(log, "wb") as out:
        try:
            process = await asyncio.create_subprocess_shell(
                command, stdin=asyncio.subprocess.DEVNULL, stdout=out,
                stderr=asyncio.subprocess.STDOUT, cwd=cwd if cwd.is_dir() else None, env=env,
                start_new_session=True)
        except OSError as exc:
            return HookOutcome(name, None, log, "", str(exc))
        code = await process.wait()
    return HookOutcome(name, code, log, _last_line(log))


def _last_line(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 4096))
            lines = [line.strip() for line in handle.read().decode(errors="replace")
                     .splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:TAIL_BYTES] if lines else ""
