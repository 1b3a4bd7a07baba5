"""pause, resume, shutdown: what a person does to the whole queue."""

from __future__ import annotations

from eq_tui.api.client import CommandResult
from eq_tui.api.command_result import result
from eq_tui.api.events import QueuePaused
from eq_tui.engine.commands.door import Door
from eq_tui.engine.context import RunContext


class QueueCommands:
    def __init__(self, ctx: RunContext, door: Door) -> None:
        self.ctx = ctx
        self.door = door

    async def pause(self) -> CommandResult:
        return await self._set_paused(True)

    async def resume(self) -> CommandResult:
        """Launching again; a phase the crash guard held is released too, and hosts that were
        stopped (disk full, a launcher gone) are tried again."""
        return await self._set_paused(False)

    async def shutdown(self) -> CommandResult:
        self.door.stop_engine()
        return result()

    async def _set_paused(self, paused: bool) -> CommandResult:
        ctx = self.ctx
        async with self.door.lock:
            ctx.paused = paused
            if not paused:
                ctx.crash_guard.release_all("resume")
            stopped = ctx.stopped_hosts()
            if not paused and stopped:
                ctx.bus.alert("info", "launching resumed on " + ", ".join(sorted(stopped)))
                for name in stopped:
                    ctx.hosts[name].stopped = None
            ctx.bus.publish(QueuePaused(project=ctx.project, at=ctx.clock(), paused=paused))
            self.door.persist()
        self.door.wake()
        return result()
