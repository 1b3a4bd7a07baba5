"""`eq-tui drain RUN_DIR HOST [--gpus 0,1] [--now]` and `eq-tui undrain RUN_DIR HOST`: a person
takes a host (or some of its GPUs) out of the run for maintenance, and gives it back.

Inside the engine this is the host's *cordon* (HostRecord.cordon), never "drain": that word is
the wait for a GPU's memory to go before a launch (tick/drain_launch.py). The cordon is set
under the engine lock, so no tick decides a launch there after it; the launches a tick decided
before and started in the background are waited for before the answer goes back (they have
started by then), so from the moment the command returns nothing new starts there. With `now`
the jobs running on the drained GPUs are stopped as a kill stops them (their checkpoint's
`signal`, SIGTERM by default; their grace to save a checkpoint, then SIGKILL) and go back to
the queue: a requeue, no retry spent; their next attempt resumes from the newest checkpoint
(tick/resume.py) on a host that takes it. Their stops run beside the ticks (tick/stops.py):
the command answers once they have stopped, and the engine ticks on meanwhile."""

from __future__ import annotations

import asyncio

from eq_tui.api.client import CommandResult
from eq_tui.api.command_result import result
from eq_tui.api.commands import Drain, Undrain
from eq_tui.api.events import HostDrained
from eq_tui.engine.commands.door import Door
from eq_tui.engine.context import RunContext
from eq_tui.hosts.base import MAX_GRACE_S


def drain_target(ctx: RunContext, command: Drain) -> str | frozenset[int]:
    """What the command drains: "all" (the whole host) or its GPUs; ValueError saying why
    not for a host the run does not have, a GPU the host does not have, a bad grace."""
    record = ctx.hosts.get(command.host)
    if record is None:
        raise ValueError(f"no host {command.host!r} in this run (its hosts: "
                         f"{', '.join(ctx.hosts)})")
    grace = command.grace
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int | float)
                              or not 0 <= grace <= MAX_GRACE_S):
        raise ValueError(f"grace must be 0 to {MAX_GRACE_S:g} seconds, not {grace!r}")
    if command.only_gpus is None:
        return "all"
    given = list(command.only_gpus) if isinstance(command.only_gpus, list | tuple) else [None]
    asked = [g for g in given if isinstance(g, int) and not isinstance(g, bool) and g >= 0]
    if not asked or len(asked) != len(given):
        raise ValueError(f"gpus must be GPU indexes, not {command.only_gpus!r}")
    known = set(record.gpu_totals or {})
    if record.snapshot is not None:
        known |= {g.index for g in record.snapshot.gpus}
    if record.allowed is not None:
        known = known & record.allowed if known else set(record.allowed)
    unknown = sorted(set(asked) - known) if known else []
    if unknown:
        raise ValueError(f"{command.host} has no GPU {','.join(map(str, unknown))} of ours "
                         f"(it has {','.join(map(str, sorted(known)))})")
    return frozenset(asked)


class Cordons:
    def __init__(self, ctx: RunContext, door: Door) -> None:
        self.ctx = ctx
        self.door = door

    async def drain(self, command: Drain) -> CommandResult:
        """Under the lock: the cordon; then (without it) the launches under way there are
        waited for; then, with `now`, the jobs there are stopped and requeued."""
        ctx = self.ctx
        async with self.door.lock:
            try:
                target = drain_target(ctx, command)
            except ValueError as exc:
                return result(error=f"drain: {exc}")
            record = ctx.hosts[command.host]
            if isinstance(target, frozenset) and isinstance(record.cordon, frozenset):
                target = target | record.cordon  # GPUs drained one call at a time add up
            record.cordon = "all" if record.cordon == "all" else target
            self.door.persist()
        await self.door.settle_launches(command.host)
        stopped: list[str] = []
        if command.now:
            grace = None if command.grace is None else float(command.grace)
            async with self.door.lock:
                tasks = self._stop_there(command.host, grace)
                stopped = list(tasks)
            # their graces are waited out of the lock: the ticks go on meanwhile
            await asyncio.gather(*tasks.values(), return_exceptions=True)
        async with self.door.lock:
            gpus = () if record.cordon == "all" else tuple(sorted(record.cordoned()))
            ctx.bus.publish(HostDrained(project=ctx.project, at=ctx.clock(), host=command.host,
                                        gpus=gpus, stopped=tuple(stopped), by=command.by))
            what = "" if not gpus else f" GPU {','.join(map(str, gpus))}"
            moved = (f"; {len(stopped)} running jobs stopped to resume elsewhere: "
                     f"{', '.join(stopped)}" if stopped else "")
            ctx.bus.alert("info", f"{command.host}{what} drained{_by(command.by)}: nothing new "
                          f"launches there until `eq-tui undrain`{moved}", host=command.host)
        return result({command.host: "ok"}, detail={"drained": record.cordon_json(),
                                                    "stopped": stopped})

    def _stop_there(self, host: str, grace: float | None) -> dict[str, asyncio.Task[None]]:
        """Under the lock: the running jobs on the host's drained GPUs, each marked and its
        stop begun beside the ticks (tick/stops.py), which requeues it once it has stopped."""
        record = self.ctx.hosts[host]
        drained = record.cordoned()
        whole = record.cordon == "all"
        jobs = [job for job in self.ctx.ledger.jobs.values()
                if job.status.is_active and job.host == host
                and (whole or bool(set(job.gpus) & drained))]
        stops = self.door.stops
        return {job.id: task for job in jobs
                if (task := stops.begin(job, stops.stop_for(job, grace))) is not None}

    async def undrain(self, command: Undrain) -> CommandResult:
        ctx = self.ctx
        async with self.door.lock:
            record = ctx.hosts.get(command.host)
            if record is None:
                return result(error=f"undrain: no host {command.host!r} in this run")
            if record.cordon is None:
                return result({command.host: "not drained"})
            record.cordon = None
            self.door.persist()
            ctx.bus.publish(HostDrained(project=ctx.project, at=ctx.clock(), host=command.host,
                                        drained=False, by=command.by))
            ctx.bus.alert("info", f"{command.host} given back{_by(command.by)}: jobs launch "
                          "there again", host=command.host)
        return result({command.host: "ok"})


def _by(who: str) -> str:
    return f" by {who}" if who else ""
