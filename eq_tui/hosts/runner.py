"""How a host runs a shell snippet: `sh -c SCRIPT eq-tui ARGS...`, with optional stdin.

Local hosts use a subprocess, ssh hosts an asyncssh channel on one shared connection;
the snippets (package data in hosts/scripts/) are the same for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: bytes
    stderr: bytes


class CommandRunner(Protocol):
    async def run(self, script: str, args: Sequence[str] = (), *, stdin: bytes = b"",
                  timeout: float | None = 30.0) -> CommandResult:
        """Run `sh -c script eq-tui args...`; raise HostError when the host cannot be reached."""
        ...

    async def close(self) -> None: ...
