"""A link a test can cut: a Unix-socket relay in front of an engine's control socket. `cut()`
drops every connection through it; `down()` also refuses new ones until `up()`;
`cut_after_command()` lets the next command through to the engine and drops the connection
before its answer comes back (the case a command id is for)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path


class CutLink:
    def __init__(self, target: Path, path: Path) -> None:
        self.target = target
        self.path = path
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._cut_after_command = False
        self.commands_let_through = 0

    async def up(self) -> None:
        self._server = await asyncio.start_unix_server(self._relay, path=str(self.path),
                                                       limit=1 << 26)

    async def down(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.cut()

    def cut(self) -> None:
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    def cut_after_command(self) -> None:
        self._cut_after_command = True

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            engine_reader, engine_writer = await asyncio.open_unix_connection(
                str(self.target), limit=1 << 26)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, engine_writer}

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                       to_engine: bool) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while line := await src.readline():
                    dst.write(line)
                    await dst.drain()
                    if to_engine and self._cut_after_command and b'"op": "command"' in line:
                        self._cut_after_command = False
                        self.commands_let_through += 1
                        self.cut()  # the engine has it; its answer is lost
                        return
            dst.close()

        await asyncio.gather(pump(reader, engine_writer, True),
                             pump(engine_reader, writer, False))
