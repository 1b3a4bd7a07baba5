"""A job's checkpoint files on its host (hosts/scripts/checkpoints.sh over the host's own
connection), and which one a restart resumes from: the newest complete one. A file still
growing between the script's two looks, an empty file, and one a resume has already failed on
are never chosen."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from eq_tui.errors import HostError
from eq_tui.hosts.runner import CommandRunner
from eq_tui.hosts.shell_protocol import script


@dataclass(frozen=True)
class CheckpointFile:
    path: str  # as the glob matched it: relative to the job's working directory
    size: int
    mtime: float


def parse_checkpoints(out: str) -> list[CheckpointFile]:
    """checkpoints.sh's lines, newest first (the later name first among equal times)."""
    files = []
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or not parts[2]:
            continue
        try:
            files.append(CheckpointFile(path=parts[2], size=int(parts[1]),
                                        mtime=float(parts[0])))
        except ValueError:
            continue
    return sorted(files, key=lambda f: (f.mtime, f.path), reverse=True)


def newest(files: list[CheckpointFile], failed: Collection[str] = ()) -> CheckpointFile | None:
    """The newest file a resume may use: not empty, not one a resume failed on."""
    return next((f for f in files if f.size > 0 and f.path not in failed), None)


async def list_checkpoints(runner: CommandRunner, cwd: str | None, pattern: str, *,
                           host: str) -> list[CheckpointFile]:
    result = await runner.run(script("checkpoints.sh"), [cwd or "-", pattern], timeout=30)
    if result.returncode != 0:
        raise HostError(f"{host}: cannot list checkpoints {pattern!r}: "
                        f"{result.stderr.decode(errors='replace').strip()[:300]}")
    return parse_checkpoints(result.stdout.decode(errors="replace"))
