"""What a person can ask of a running queue: one table from each typed command
(eq_tui/api/commands.py) to its handler, each answering with a typed CommandResult (per job
"ok" or why not). The handlers live by family: job_commands.py (kill, retry, requeue),
holds.py (hold, release, priority), editing.py (edit, clone, add, reload), early_stop_edit.py
(edit --early-stop), search_edit.py (edit --search, hold and release of a search's phase),
queue_commands.py (pause, resume, shutdown), cordon.py (drain, undrain),
and GPU health's release."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from eq_tui.api.client import CommandResult, SecretsAnswer
from eq_tui.api.command_result import result
from eq_tui.api.commands import (
    Add,
    Clone,
    Command,
    CommandError,
    Drain,
    Edit,
    Hold,
    Kill,
    OnJobs,
    Pause,
    Release,
    ReleaseGpu,
    Reload,
    Requeue,
    Resume,
    Retry,
    SetEarlyStop,
    SetPriority,
    SetSearch,
    Shutdown,
    Undrain,
    from_wire,
)
from eq_tui.api.model import JobState
from eq_tui.engine.commands.cordon import Cordons
from eq_tui.engine.commands.door import Door
from eq_tui.engine.commands.early_stop_edit import set_early_stop
from eq_tui.engine.commands.editing import Editing
from eq_tui.engine.commands.holds import Holds
from eq_tui.engine.commands.job_commands import JobCommands, kill_stop
from eq_tui.engine.commands.queue_commands import QueueCommands
from eq_tui.engine.commands.search_edit import hold_search, release_search, set_search
from eq_tui.engine.context import RunContext
from eq_tui.engine.tick.gpu_health import release as release_gpu
from eq_tui.errors import HostError
from eq_tui.manifest.secrets import take_secrets

__all__ = ["Commands", "result"]

JobHandler = Callable[[JobState], Awaitable[str]]
Handler = Callable[[Any, str | None], Awaitable[CommandResult]]


class Commands:
    def __init__(self, ctx: RunContext, door: Door) -> None:
        self.door = door
        self.ctx = ctx
        holds, editing = Holds(ctx), Editing(ctx, door)
        jobs, queue = JobCommands(ctx, door), QueueCommands(ctx, door)
        cordons = Cordons(ctx, door)
        self._release_jobs = self._each_job(holds.release)
        self._hold_jobs = self._each_job(holds.hold)
        self._jobs = jobs
        self.handlers: dict[type[Command], Handler] = {
            Kill: self._kill, Retry: self._each_job(jobs.retry),
            Requeue: self._each_job(jobs.requeue), Hold: self._hold,
            Release: self._release,
            SetPriority: self._locked(holds.priority), Edit: self._locked(editing.edit),
            Clone: self._locked(editing.clone), Add: self._locked(editing.add),
            Reload: self._locked(editing.reload),
            SetEarlyStop: self._locked(self._early_stop),
            SetSearch: self._locked(self._search),
            Pause: lambda _c, _i: queue.pause(), Resume: lambda _c, _i: queue.resume(),
            Shutdown: lambda _c, _i: queue.shutdown(),
            ReleaseGpu: self._release_gpus,
            Drain: self._unlocked(cordons.drain), Undrain: self._unlocked(cordons.undrain),
        }

    async def run(self, name: str, job_ids: list[str] | None = None,
                  args: dict[str, Any] | None = None,
                  command_id: str | None = None) -> CommandResult:
        """A command as it comes over the wire: its name, ids and arguments."""
        try:
            command = from_wire(name, job_ids, args)
        except CommandError as exc:
            why = str(exc)
            return await self.ctx.commands.once(command_id, lambda: _refused(why))
        return await self.send(command, command_id)

    async def send(self, command: Command, command_id: str | None = None) -> CommandResult:
        """A typed command; `command_id` (the client's) applies it once, however often sent."""
        handler = self.handlers[type(command)]
        self.ctx.awaiting_command_until = None  # it came: launch and finish as usual
        return await self.ctx.commands.once(command_id, lambda: handler(command, command_id))

    # ---- how each kind of command is run ---------------------------------------------------

    def _each_job(self, handler: JobHandler) -> Handler:
        """Each named job on its own (side by side), under the engine lock."""
        async def run(command: OnJobs, command_id: str | None) -> CommandResult:
            if not command.job_ids:
                return result(error=f"{command.name} needs at least one job id")
            unique_ids = list(dict.fromkeys(command.job_ids))
            async with self.door.lock:
                answers = await asyncio.gather(*(self._on_job(handler, job_id)
                                                 for job_id in unique_ids))
                done = result(dict(zip(unique_ids, answers, strict=True)))
                self._written(command_id, done)
            self.door.wake()
            return done
        return run

    def _locked(self, handler: Callable[[Any], Awaitable[CommandResult]]) -> Handler:
        """A command with arguments beyond job ids, run whole under the engine lock."""
        async def run(command: Command, command_id: str | None) -> CommandResult:
            async with self.door.lock:
                done = await handler(command)
                self._written(command_id, done)
            self.door.wake()
            return done
        return run

    def _unlocked(self, handler: Callable[[Any], Awaitable[CommandResult]]) -> Handler:
        """A command that takes the engine lock itself, in steps (drain: it waits for the
        launches under way without it)."""
        async def run(command: Command, command_id: str | None) -> CommandResult:
            done = await handler(command)
            async with self.door.lock:
                self._written(command_id, done)
            self.door.wake()
            return done
        return run

    async def _on_job(self, handler: JobHandler, job_id: str) -> str:
        job = self.ctx.ledger.jobs.get(job_id)
        if job is None:
            return "no such job"
        try:
            return await handler(job)
        except HostError as exc:
            return f"host error: {exc}"

    def _written(self, command_id: str | None, done: CommandResult) -> None:
        """The command's id goes to disk in the same write as the changes it made."""
        self.door.check_finished()
        self.ctx.commands.remember(command_id, done)
        self.door.persist_if_unsaved()

    async def _kill(self, command: Kill, command_id: str | None) -> CommandResult:
        """Each named job killed, with the grace the command gives its job to save first."""
        try:
            stop = kill_stop(command.grace)
        except ValueError as exc:
            return result(error=f"kill: {exc}")
        return await self._each_job(lambda job: self._jobs.kill(job, stop))(command, command_id)

    async def _release(self, command: Release, command_id: str | None) -> CommandResult:
        """Held jobs, or (`phase`) a phase the crash guard or a person holds."""
        if command.phase is None:
            return await self._release_jobs(command, command_id)
        return await self._phase_verb("release", command, command_id, self._release_phase)

    def _release_phase(self, phase: str, by: str) -> str:
        released = self.ctx.crash_guard.release(phase, by)
        released = release_search(self.ctx, phase, by) or released
        if released:
            return "ok"
        return "not held by the crash guard" + (" nor by a person" if phase in self._searching()
                                                else "")

    async def _phase_verb(self, verb: str, command: Hold | Release, command_id: str | None,
                          act: Callable[[str, str], str]) -> CommandResult:
        """`hold`/`release --phase`: `act(phase, by)` under the lock, its answer kept."""
        if command.job_ids:
            return result(error=f"{verb} takes job ids or a phase, not both")
        assert command.phase is not None
        async with self.door.lock:
            by = f"{verb} by {command.by}" if command.by else verb
            done = result({f"phase {command.phase}": act(command.phase, by)})
            self.door.persist()
            self._written(command_id, done)
        self.door.wake()
        return done

    async def _early_stop(self, command: SetEarlyStop) -> CommandResult:
        return set_early_stop(self.ctx, command)

    async def _search(self, command: SetSearch) -> CommandResult:
        return set_search(self.ctx, command)

    async def _hold(self, command: Hold, command_id: str | None) -> CommandResult:
        """Waiting jobs, or (`phase`) the search of a phase."""
        if command.phase is None:
            return await self._hold_jobs(command, command_id)
        return await self._phase_verb(
            "hold", command, command_id, lambda phase, by: hold_search(self.ctx, phase, by))

    def _searching(self) -> set[str]:
        return {p.name for p in self.ctx.manifest.phases if p.search is not None}

    async def _release_gpus(self, command: ReleaseGpu, command_id: str | None
                            ) -> CommandResult:
        if not command.gpus:
            return result(error="name at least one GPU as HOST:GPU")
        results: dict[str, str] = {}
        async with self.door.lock:
            for target in command.gpus:
                host, _, index = target.rpartition(":")
                results[target] = (release_gpu(self.ctx, host, int(index))
                                   if host and index.isdigit() else "not HOST:GPU")
            done = result(results)
            self._written(command_id, done)
        self.door.wake()
        return done

    # ---- secrets, handed over while the engine runs -----------------------------------------

    async def take_secrets(self, values: dict[str, str], project: str) -> SecretsAnswer:
        """Not a logged command: its values must never reach the state file's command log."""
        async with self.door.lock:
            taken = take_secrets(self.ctx.manifest, values, project)
            self.ctx.replace_manifest(taken.manifest)
            if taken.given:
                still = (f"; still missing: {', '.join(taken.missing)}" if taken.missing
                         else "; nothing missing now")
                self.ctx.bus.alert("info", f"secrets handed over the control socket: "
                                           f"{', '.join(taken.given)} (kept in memory only)"
                                           f"{still}")
        if taken.given:
            self.door.wake()
        return {"given": taken.given, "refused": taken.refused, "missing": taken.missing,
                "error": taken.error}


async def _refused(why: str) -> CommandResult:
    return result(error=why)
