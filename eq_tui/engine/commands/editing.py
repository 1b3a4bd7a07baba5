"""Changing the queue's jobs while it runs: edit a job that is not running, clone any job,
add a job to a phase, reload the manifest file (reload.py). Each change is in the job's record
(`edits`, `origin`) and in events.jsonl (job_edited, job_added, job_retired)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from eq_tui.api.client import CommandResult
from eq_tui.api.command_args import ArgError, apply_sets, unknown_flag
from eq_tui.api.command_result import result
from eq_tui.api.commands import Add, Clone, Edit, Reload
from eq_tui.api.events import JobAdded, JobEdited
from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.commands.door import Door
from eq_tui.engine.commands.reload import reload_manifest
from eq_tui.engine.context import RunContext
from eq_tui.engine.state.job_specs import sharing_args, spec_to_json
from eq_tui.engine.state.naming import ID_PATTERN
from eq_tui.manifest.model import AddedJobDefaults, JobSpec

MAX_ID = 100
MAX_CMD = 64 * 1024


def check_new_id(ctx: RunContext, job_id: Any) -> str | None:
    """Why `job_id` cannot name a new job, or None."""
    if not isinstance(job_id, str) or not ID_PATTERN.fullmatch(job_id) or len(job_id) > MAX_ID:
        return (f"job id {job_id!r} may only use letters, digits, '_', '.', '-' (at most "
                f"{MAX_ID})")
    if job_id in ctx.ledger.jobs:
        return f"a job {job_id!r} exists already"
    if any(old.get("id") == job_id for old in ctx.ledger.retired):
        return f"{job_id!r} named a job retired earlier (its logs keep that name); pick another"
    return None


def check_cmd(cmd: Any) -> str | None:
    if not isinstance(cmd, str) or not cmd.strip():
        return "the command is empty"
    if "\0" in cmd or len(cmd) > MAX_CMD:
        return "the command holds a NUL byte or is too long"
    return None


class Editing:
    def __init__(self, ctx: RunContext, door: Door) -> None:
        self.ctx = ctx
        self.door = door

    def _new_cmd(self, base: str, cmd: Any, sets: Mapping[str, Any],
                 add_flags: Mapping[str, Any] | None = None) -> tuple[str | None, str | None]:
        """(the command `cmd`, `sets` and `add_flags` ask for, or None and why). A set flag
        must be one the command has: a typo would add a flag its script does not take."""
        cmd = str(base if cmd is None else cmd)
        try:
            changes = {str(k): str(v) for k, v in dict(sets or {}).items()}
            added = {str(k): str(v) for k, v in dict(add_flags or {}).items()}
            problem = unknown_flag(cmd, changes)
            if problem is not None:
                return None, problem
            cmd = apply_sets(cmd, {**changes, **added})
        except (ArgError, TypeError, ValueError) as exc:
            return None, str(exc)
        problem = check_cmd(cmd)
        return (None, problem) if problem else (cmd, None)

    # ---- edit ------------------------------------------------------------------------------

    async def edit(self, command: Edit) -> CommandResult:
        if not command.job_ids:
            return result(error="edit needs at least one job id")
        if command.cmd is None and not command.sets and not command.add_flags:
            return result(error="edit needs a new command, --set key=value or --add-flag")
        results = {job_id: self._edit_one(job_id, command) for job_id in command.job_ids}
        return result(results)

    def _edit_one(self, job_id: str, command: Edit) -> str:
        ctx = self.ctx
        job = ctx.ledger.jobs.get(job_id)
        if job is None:
            return "no such job"
        if job.status.is_active:
            return f"{job.status}: kill or requeue it first, or clone it"
        new, problem = self._new_cmd(job.cmd, command.cmd, command.sets, command.add_flags)
        if new is None:
            return problem or "invalid command"
        if new == job.cmd:
            return "unchanged: that is its command already"
        by = command.by
        ledger = ctx.ledger
        old, requeue = job.cmd, job.status.is_finished
        now = ctx.clock()
        ledger.change_cmd(job, new)
        spec = ledger.specs.get(job.id)
        if spec is not None:
            ledger.set_spec(job.id, replace(spec, cmd=new))
        if job.spec is not None:
            ledger.update(job, spec={**job.spec, "cmd": new})
        ledger.update(job, edits=[*job.edits, {"kind": "edit", "at": now, "by": by, "old": old,
                                               "new": new, "requeued": requeue}])
        ctx.bus.publish(JobEdited(project=ctx.project, at=now, job=job.id, old_cmd=old,
                                  new_cmd=new, by=by, requeued=requeue))
        if requeue:  # a finished job edited runs again, with a fresh count of attempts
            ctx.ledger.reset_attempts(job)
            ctx.ledger.set_status(job, JobStatus.PENDING)
        else:
            ctx.ledger.changed(job)
        return "ok"

    # ---- clone and add ---------------------------------------------------------------------

    async def clone(self, command: Clone) -> CommandResult:
        ctx = self.ctx
        source = ctx.ledger.jobs.get(command.job)
        spec = ctx.ledger.specs.get(command.job)
        if source is None or spec is None:
            return result({command.job: "no such job"})
        new_id = command.new_id or self._clone_id(source.id)
        problem = check_new_id(ctx, new_id)
        cmd, cmd_problem = self._new_cmd(source.cmd, command.cmd, command.sets,
                                         command.add_flags)
        if problem or cmd is None:
            return result(error=problem or cmd_problem)
        priority = source.priority if command.priority is None else command.priority
        if not isinstance(priority, int):
            return result(error=f"priority must be a whole number, not {priority!r}")
        sharing = sharing_args(_given(mem_mib=command.mem_mib, exclusive=command.exclusive),
                               spec.gpus_per_job, spec.mem_mib, spec.exclusive)
        if isinstance(sharing, str):
            return result(error=sharing)
        # the clone keeps its source's family: it learns memory from the same siblings
        new_spec = replace(spec, id=new_id, cmd=cmd, priority=priority, mem_mib=sharing[0],
                           exclusive=sharing[1])
        if spec.checkpoint is not None:
            # its command saves where its source's does, so the contract would have a restart
            # resume from the source's checkpoints: it restarts from scratch instead
            new_spec = replace(new_spec, checkpoint=None)
            ctx.bus.alert("warning", f"{new_id}: a clone of {source.id} keeps no checkpoint "
                          f"contract: its command saves where {source.id}'s does "
                          f"({spec.checkpoint.path}), and a restart would resume from "
                          f"{source.id}'s checkpoints; it restarts from scratch", job=new_id)
        self._add(new_spec, "clone", command.by, source=source.id)
        return result({new_id: "ok"}, detail={"job": new_id, "source": source.id})

    def _clone_id(self, source: str) -> str:
        n = 1
        while check_new_id(self.ctx, f"{source}-clone{n}") is not None and n < 10_000:
            n += 1
        return f"{source}-clone{n}"

    async def add(self, command: Add) -> CommandResult:
        ctx = self.ctx
        manifest = ctx.manifest
        job_id = command.id
        phases = [phase.name for phase in manifest.phases]
        phase = command.phase or (phases[0] if len(phases) == 1 else None)
        # watched, checked and read like the jobs written in its phase
        inherited = manifest.phase(str(phase)).added_jobs if phase in phases \
            else AddedJobDefaults(gpus_per_job=manifest.gpus_per_job)
        gpus = inherited.gpus_per_job if command.gpus_per_job is None else command.gpus_per_job
        priority = inherited.priority if command.priority is None else command.priority
        problem = check_new_id(ctx, job_id) or check_cmd(command.cmd)
        if problem is None and phase not in phases:
            problem = (f"give a phase: {', '.join(phases)}" if phase is None else
                       f"no phase {phase!r} here (phases: {', '.join(phases)})")
        if problem is None and (isinstance(gpus, bool) or not isinstance(gpus, int)
                                or not 0 <= gpus <= 64):
            problem = f"gpus_per_job must be a whole number from 0 to 64, not {gpus!r}"
        if problem is None and not isinstance(priority, int):
            problem = f"priority must be a whole number, not {priority!r}"
        preempt = inherited.preempt if command.preempt is None else command.preempt
        if problem is None and preempt not in (True, False, "force"):
            problem = f"preempt must be true, false or force, not {preempt!r}"
        sharing = sharing_args(_given(mem_mib=command.mem_mib, exclusive=command.exclusive),
                               gpus, inherited.mem_mib, inherited.exclusive) \
            if problem is None else problem
        if isinstance(sharing, str):
            return result(error=sharing)
        spec = JobSpec(id=str(job_id), phase=str(phase), cmd=str(command.cmd),
                       output_check=command.output_check or inherited.output_check,
                       preconditions=inherited.preconditions, gpus_per_job=gpus,
                       metrics=inherited.metrics, priority=priority,
                       stall_after=inherited.stall_after, on_stall=inherited.on_stall,
                       mem_mib=sharing[0], exclusive=sharing[1], family=str(phase),
                       preempt=preempt, max_preemptions=inherited.max_preemptions,
                       retry_lost=inherited.retry_lost)
        self._add(spec, "added", command.by)
        left_out = [key for key in inherited.left_out
                    if not (command.output_check and key.startswith("output_check"))]
        return result({spec.id: "ok"}, detail={"job": spec.id, "phase": spec.phase,
                                               "left_out": left_out})

    def _add(self, spec: JobSpec, origin: str, by: str, *, source: str | None = None) -> None:
        ctx = self.ctx
        now = ctx.clock()
        job = JobState(id=spec.id, phase=spec.phase, cmd=spec.cmd, priority=spec.priority,
                       priority_set=spec.priority != 0, origin=origin,
                       spec=spec_to_json(spec),
                       edits=[{"kind": origin, "at": now, "by": by, "source": source,
                               "new": spec.cmd}])
        ctx.bus.publish(JobAdded(project=ctx.project, at=now, job=spec.id, phase=spec.phase,
                                 cmd=spec.cmd, origin=origin, source=source, by=by,
                                 spec=spec_to_json(spec)))
        ctx.ledger.add_job(job, spec)

    # ---- reload ----------------------------------------------------------------------------

    async def reload(self, command: Reload) -> CommandResult:
        done = await reload_manifest(self.ctx, by=command.by, dry_run=bool(command.dry_run),
                                     force=command.force is True)
        if done["ok"] and not command.dry_run:
            self.door.persist(whole=True)  # retired jobs leave the state file
        return done


def _given(**values: Any) -> dict[str, Any]:
    """The arguments a sender gave (None: not given)."""
    return {key: value for key, value in values.items() if value is not None}
