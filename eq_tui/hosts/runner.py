"""How a host runs a shell snippet: `sh -c SCRIPT eq-tui ARGS...`, with optional stdin.

Local hosts use a subprocess, ssh hosts an asyncssh channel on one shared connection;
the snippets (package data in hosts/scripts/) are the same for both. A runner may also
`stream` a long-lived snippet's output line by line (the per-host watcher).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


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


class LineStream(Protocol):
    """The stdout of a long-lived command, line by line."""

    async def readline(self) -> bytes:
        """The next line (with its newline); b"" once the command has ended."""
        ...

    async def close(self) -> None:
        """Stop the command (if still running) and release its channel or process."""
        ...


@runtime_checkable
class StreamingRunner(Protocol):
    async def stream(self, script: str, args: Sequence[str] = (), *,
                     stdin: bytes = b"") -> LineStream:
        """Start `sh -c script eq-tui args...`, feed it stdin (then EOF), stream its stdout.
        Raise HostError when the host cannot be reached."""
        ...
