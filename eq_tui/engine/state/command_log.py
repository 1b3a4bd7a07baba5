"""Commands carry an id their client makes up; one sent again (the link dropped before the
reply came) is answered with the first one's result instead of being applied twice. The recent
ids and their results are kept in the state file, so a restarted engine still knows them."""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from eq_tui.api.client import CommandResult

KEEP = 500  # recent command ids remembered
MAX_ID = 128
KEEP_RESULTS = 100  # per-job outcomes kept with an id (a bulk kill of 10,000 jobs keeps 100)
KEEP_DETAIL_CHARS = 4000


def _kept(result: CommandResult) -> CommandResult:
    """What is kept of an answer to give a repeat: bounded, since the state file holds it."""
    kept: CommandResult = {**result}
    outcomes = result.get("results") or {}
    if len(outcomes) > KEEP_RESULTS:
        kept["results"] = dict(list(outcomes.items())[:KEEP_RESULTS])
        kept["error"] = (f"{result.get('error') or 'done'} (a repeat: the first "
                         f"{KEEP_RESULTS} of {len(outcomes)} outcomes)")
    detail = result.get("detail")
    if detail is not None and len(json.dumps(detail, default=str)) > KEEP_DETAIL_CHARS:
        kept["detail"] = {"trimmed": True}
    return kept


class CommandLog:
    def __init__(self) -> None:
        self._done: OrderedDict[str, CommandResult] = OrderedDict()
        self._running: dict[str, asyncio.Future[CommandResult]] = {}

    def remember(self, command_id: str | None, result: CommandResult) -> None:
        """Called by a command before its changes are written, so both reach the disk in the
        same write."""
        if not command_id:
            return
        self._done[command_id] = _kept(result)
        self._done.move_to_end(command_id)
        while len(self._done) > KEEP:
            self._done.popitem(last=False)

    async def once(self, command_id: str | None,
                   apply: Callable[[], Awaitable[CommandResult]]) -> CommandResult:
        """`apply()` the first time this id is seen; the same result (marked `duplicate`)
        every time after, also while the first is still being applied."""
        if not command_id:
            return await apply()
        if len(command_id) > MAX_ID:
            return {"ok": False, "results": {}, "error": f"command id longer than {MAX_ID}"}
        done = self._done.get(command_id)
        if done is not None:
            return {**done, "duplicate": True}
        running = self._running.get(command_id)
        if running is not None:
            return {**await asyncio.shield(running), "duplicate": True}
        future: asyncio.Future[CommandResult] = asyncio.get_running_loop().create_future()
        self._running[command_id] = future
        try:
            result = await apply()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a duplicate waiting on it gets it, nobody else
            raise
        finally:
            self._running.pop(command_id, None)
        self.remember(command_id, result)
        future.set_result(result)
        return result

    def to_json(self) -> list[list[Any]]:
        return [[command_id, result] for command_id, result in self._done.items()]

    def restore(self, saved: Any) -> None:
        for item in saved or []:
            if isinstance(item, list) and len(item) == 2 and isinstance(item[1], dict):
                self._done[str(item[0])] = item[1]  # type: ignore[assignment]
