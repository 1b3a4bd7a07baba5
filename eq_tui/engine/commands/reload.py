"""`reload`: read the manifest file again and bring the waiting jobs in step with it. New jobs
are added, waiting (pending, held, OOM-delayed) jobs whose definition changed are updated,
waiting jobs gone from the file are retired. Running and finished jobs are never touched.
Hosts and settings are not changed on a running engine: the plan says which differ.

What a person changed stays unless `force`: a command they edited (the file's command for that
job is not applied when the file changed it), a priority they set, and a job they held,
edited or prioritised is not retired when it is gone from the file. The plan's `by_person`
says which of the file's changes were not applied because of them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, fields, replace
from typing import Any

from eq_tui.api.client import CommandResult
from eq_tui.api.command_result import result
from eq_tui.api.events import JobAdded, JobEdited
from eq_tui.api.model import JobState
from eq_tui.engine.commands.search_edit import amounts_text
from eq_tui.engine.commands.search_reload import amount_changes, search_refusal, without_amounts
from eq_tui.engine.context import RunContext
from eq_tui.engine.state.job_specs import same_definition
from eq_tui.engine.state.search_edits import with_amounts
from eq_tui.errors import EqTuiError
from eq_tui.manifest.loader import load_manifest
from eq_tui.manifest.model import EarlyStopSpec, JobSpec, Manifest, ResultsSpec

_NOT_SETTINGS = ("source", "jobs", "phases")


@dataclass
class ReloadPlan:
    add: list[str] = field(default_factory=list)
    update: list[str] = field(default_factory=list)
    retire: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)  # job id -> why it is left alone
    not_applied: list[str] = field(default_factory=list)  # settings a restart would change
    # job id -> what of the file was not applied to it because a person changed it
    by_person: dict[str, str] = field(default_factory=dict)
    # job id -> the definition an update gives it (the file's, less what a person changed)
    specs: dict[str, JobSpec] = field(default_factory=dict)
    # phases whose early_stop changed (applied for the rest of the run): phase -> the new one
    early_stop: dict[str, str] = field(default_factory=dict)
    # phases whose early_stop the file changed but a person had set (eq-tui edit
    # --early-stop): left as they are without --force; phase -> the file's, in words
    early_stop_kept: dict[str, str] = field(default_factory=dict)
    # phases whose search trials/budget the file changed (applied for the rest of the run),
    # and those a person had set (eq-tui edit --search: kept without --force); phase -> words
    search: dict[str, str] = field(default_factory=dict)
    search_kept: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"add": self.add, "update": self.update, "retire": self.retire,
                "kept": self.kept, "not_applied": self.not_applied,
                "by_person": self.by_person,
                "early_stop": self.early_stop, "early_stop_kept": self.early_stop_kept,
                "search": self.search, "search_kept": self.search_kept}


def _no_early_stop(results: ResultsSpec) -> ResultsSpec:
    return replace(results, early_stop=None)


def early_stop_text(spec: EarlyStopSpec | None) -> str:
    if spec is None:
        return "off"
    rule = "median" if spec.rule == "median" else f"{spec.rule}, eta {spec.eta}"
    return f"{spec.metric} ({spec.goal}), {rule}, grace {spec.grace}"


def early_stop_changes(old: Manifest, new: Manifest) -> dict[str, str]:
    """Phases (in both) whose early_stop the file changed: each one's new setting, in words."""
    by_name = {phase.name: phase for phase in new.phases}
    return {phase.name: early_stop_text(by_name[phase.name].results.early_stop)
            for phase in old.phases if phase.name in by_name
            and by_name[phase.name].results.early_stop != phase.results.early_stop}


def with_early_stop(old: Manifest, new: Manifest, keep: frozenset[str] = frozenset()
                    ) -> Manifest:
    """`old` with the early_stop settings of `new` (per phase but those in `keep`, and the top
    level's)."""
    by_name = {phase.name: phase for phase in new.phases}
    phases = tuple(replace(phase, results=replace(
        phase.results, early_stop=by_name[phase.name].results.early_stop))
        if phase.name in by_name and phase.name not in keep else phase
        for phase in old.phases)
    return replace(old, phases=phases,
                   results=replace(old.results, early_stop=new.results.early_stop))


def _untouchable(job: JobState) -> str | None:
    if job.status.is_active:
        return f"{job.status}: never touched while it runs"
    if job.status.is_finished:
        return f"{job.status}: finished jobs are never touched (edit one to run it again)"
    return None


def _edited_by_person(job: JobState) -> list[dict[str, Any]]:
    return [edit for edit in job.edits if edit.get("kind") == "edit"]


def wanted(job: JobState, spec: JobSpec, before: JobSpec | None,
           force: bool) -> tuple[JobSpec, list[str]]:
    """The definition a reload gives `job` from the file's `spec` (`before`: its spec in the
    manifest the engine was started with), and what of the file that leaves out because a
    person changed it (their command stays; their priority is kept by `_update`)."""
    if force:
        return spec, []
    left: list[str] = []
    edited = _edited_by_person(job)
    if edited and spec.cmd != job.cmd:
        if spec.cmd != edited[0].get("old"):  # the file changed it too, not only the person
            left.append(f"its command `{spec.cmd}` (a person's edit `{job.cmd}` stays)")
        spec = replace(spec, cmd=job.cmd)
    if (job.priority_set and job.priority != spec.priority
            and (before is None or before.priority != spec.priority)):
        left.append(f"its priority {spec.priority} (a person set {job.priority})")
    return spec, left


def _kept_from_retirement(job: JobState) -> str | None:
    changed = [what for what, yes in (("held", job.status.is_held),
                                      ("edited", bool(_edited_by_person(job))),
                                      ("prioritised", job.priority_set)) if yes]
    return f"its retirement (a person {' and '.join(changed)} it)" if changed else None


def plan_reload(jobs: dict[str, JobState], specs: dict[str, JobSpec], old: Manifest,
                new: Manifest, *, force: bool = False) -> ReloadPlan:
    """What a reload would do; pure. `force`: the file's definitions over a person's changes."""
    plan = ReloadPlan()
    phases = {phase.name for phase in old.phases}
    for spec in new.jobs:
        job = jobs.get(spec.id)
        if job is None:
            if spec.phase not in phases:
                plan.kept[spec.id] = f"not added: phase {spec.phase!r} is new (restart to use it)"
            else:
                plan.add.append(spec.id)
            continue
        current = specs.get(spec.id)
        target, left = wanted(job, spec, old.job_specs.get(spec.id), force)
        changed = current is None or not same_definition(current, target) or (
            (force or not job.priority_set) and job.priority != spec.priority)
        why = _untouchable(job)
        if left and not why:
            plan.by_person[spec.id] = "; ".join(left)
        if not changed:
            continue
        if why:
            plan.kept[spec.id] = f"changed in the file, but {why}"
        else:
            plan.update.append(spec.id)
            plan.specs[spec.id] = target
    in_file = new.job_specs
    for job in jobs.values():
        if job.id in in_file or job.origin not in ("manifest", "reload"):
            continue
        why = _untouchable(job)
        person = None if force else _kept_from_retirement(job)
        if why:
            plan.kept[job.id] = f"gone from the file, but {why}"
        elif person:
            plan.by_person[job.id] = person
        else:
            plan.retire.append(job.id)
    plan.not_applied = [f.name for f in fields(Manifest) if f.name not in _NOT_SETTINGS
                        and f.name != "results" and getattr(old, f.name) != getattr(new, f.name)]
    if _no_early_stop(old.results) != _no_early_stop(new.results):
        plan.not_applied.append("results")
    stripped = [[without_amounts(replace(p, results=_no_early_stop(p.results))) for p in m.phases]
                for m in (old, new)]
    if stripped[0] != stripped[1]:
        plan.not_applied.append("phases")
    plan.early_stop = early_stop_changes(old, new)
    return plan


async def reload_manifest(ctx: RunContext, *, by: str, dry_run: bool,
                          force: bool = False) -> CommandResult:
    source = ctx.manifest.source
    try:
        new = await asyncio.to_thread(load_manifest, source)
    except EqTuiError as exc:
        return result(error=f"the manifest was not reloaded: {exc}")
    if new.project != ctx.project:
        return result(error=f"{source} is now project {new.project!r}, not {ctx.project!r}; "
                            "not reloaded")
    refused = search_refusal(ctx.manifest, new)
    if refused:
        return result(error=f"the manifest was not reloaded: {refused}")
    plan = plan_reload(ctx.ledger.jobs, ctx.ledger.specs, ctx.manifest, new, force=force)
    file_said = {p.name: ctx.search_edits.manifests(p.name, ctx.manifest)
                 for p in ctx.manifest.phases}
    searches = amount_changes({name: said for name, said in file_said.items()
                               if said is not None}, new)
    for phase, amounts in searches.items():
        kept = phase in ctx.search_edits.amounts and not force
        (plan.search_kept if kept else plan.search)[phase] = amounts_text(amounts)
    edited = ctx.early_stop_edits.by_phase
    for phase in [p for p in plan.early_stop if p in edited and not force]:
        plan.early_stop_kept[phase] = plan.early_stop.pop(phase)
    detail = {"dry_run": dry_run, "force": force, "source": source, **plan.to_json()}
    if dry_run:
        return result(detail=detail)
    ledger = ctx.ledger
    now = ctx.clock()
    for job_id in plan.add:
        spec = new.job_specs[job_id]
        job = ledger.take_retired(spec) or JobState(
            id=spec.id, phase=spec.phase, cmd=spec.cmd, priority=spec.priority)
        ledger.update(job, edits=[*job.edits, {"kind": "reload", "at": now, "by": by,
                                               "new": spec.cmd}])
        ctx.bus.publish(JobAdded(project=ctx.project, at=now, job=job_id, phase=spec.phase,
                                 cmd=spec.cmd, origin="reload", by=by))
        ledger.add_job(job, spec)
    for job_id in plan.update:
        _update(ctx, ledger.jobs[job_id], plan.specs[job_id], by, now, force)
    for job_id in plan.retire:
        ledger.retire_job(job_id, by)
    if plan.early_stop:
        # for the rest of the run: the reports so far stay, the next ones are judged anew
        ctx.replace_manifest(with_early_stop(ctx.manifest, new,
                                             frozenset(plan.early_stop_kept)))
        for phase, text in plan.early_stop.items():
            ctx.early_stop_edits.forget(phase)  # forced: the file's from now on
            ctx.bus.alert("info", f"phase {phase}: early_stop is now {text} (reload by {by})")
    for phase in plan.search:
        ctx.search_edits.forget(phase)  # forced, or never edited: the file's from now on
        ctx.replace_manifest(with_amounts(ctx.manifest, phase, searches[phase]))
        ctx.bus.alert("info", f"phase {phase}: the search now asks up to {plan.search[phase]} "
                              f"(reload by {by})")
    ctx.run_dir.write_manifest(new.to_json())
    return result(detail=detail)


def _update(ctx: RunContext, job: JobState, spec: JobSpec, by: str, now: float,
            force: bool) -> None:
    old = job.cmd
    ledger = ctx.ledger
    ledger.set_spec(job.id, spec)
    ledger.update(job, phase=spec.phase)
    if force:
        ledger.update(job, priority_set=False)  # the file's priority from now on
    if not job.priority_set:
        ledger.update(job, priority=spec.priority)
    if spec.cmd != old:
        ledger.change_cmd(job, spec.cmd)
        ledger.update(job, edits=[*job.edits, {"kind": "reload", "at": now, "by": by,
                                               "old": old, "new": spec.cmd,
                                               "requeued": False}])
        ctx.bus.publish(JobEdited(project=ctx.project, at=now, job=job.id, old_cmd=old,
                                  new_cmd=spec.cmd, by=by or "reload"))
    if job.spec is not None:
        ledger.update(job, spec=None, origin="manifest")  # the file defines it now
    ledger.changed(job)
