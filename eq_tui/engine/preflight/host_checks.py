"""Before the first tick: every host checked (connection, cwd, conda env or venv, launcher, and
each distinct command's first word and script). A host that fails a check that would fail
every job there (or the jobs of a command) takes no launches; if no host can be used and
nothing runs, the run stops here."""

from __future__ import annotations

import asyncio
from typing import Any

from eq_tui.api.events import PreflightReported
from eq_tui.engine.context import RunContext
from eq_tui.engine.preflight.command_words import command_checks
from eq_tui.engine.preflight.did_you_mean import did_you_mean
from eq_tui.engine.preflight.fit import misfits, needs_gpu_facts, probe_gpu_totals
from eq_tui.errors import HostError, UnfitJobError
from eq_tui.hosts.base import CommandCheck, PreflightFinding, PreflightRequest
from eq_tui.manifest.model import Manifest
from eq_tui.present.job_ids import jobs_text

BLOCKING_CHECKS = ("cwd", "conda", "venv", "launcher", "command", "script")


def preflight_request(manifest: Manifest, cwd: str | None,
                      commands: tuple[CommandCheck, ...]) -> PreflightRequest:
    path = manifest.env.get("PATH")
    return PreflightRequest(cwd=cwd, conda=manifest.conda, conda_hook=manifest.conda_hook,
                            launcher=manifest.launcher, venv=manifest.venv, commands=commands,
                            path=path.value if path is not None else None)


def explain_all(found: list[PreflightFinding], commands: dict[str, CommandCheck],
                cwd: str | None, manifest: Manifest) -> list[PreflightFinding]:
    """A host's findings in words (`explain`), a command that does not resolve with the names
    on the host's PATH closest to it (its `suggest` findings, folded in)."""
    near: dict[str, list[str]] = {}
    for finding in found:
        if finding.check == "suggest":
            near.setdefault(finding.job or "", []).append(finding.detail)
    return [explain(finding, commands, cwd, manifest, near.get(finding.job or "", []))
            for finding in found if finding.check != "suggest"]


def explain(finding: PreflightFinding, commands: dict[str, CommandCheck], cwd: str | None,
            manifest: Manifest, near: list[str] | None = None) -> PreflightFinding:
    """A command or script finding in words: the word, where it was looked for, which jobs;
    for a command that does not resolve, the closest of `near` (names on the host's PATH)."""
    check = commands.get(finding.job or "") if finding.check in ("command", "script") else None
    if check is None:
        return finding
    where = cwd or "the home directory"
    env = (f" with conda env {manifest.conda}" if manifest.conda else
           f" with venv {manifest.venv}" if manifest.venv else "")
    if finding.check == "command":
        detail = (f"`{finding.detail}` found" if finding.ok else
                  f"`{finding.detail}` not found (command -v in {where}{env})"
                  f"{did_you_mean(finding.detail, near or [])}")
    else:
        detail = (f"{finding.detail} exists" if finding.ok else
                  f"script {finding.detail} does not exist in {where}")
    return PreflightFinding(finding.host, finding.check, finding.ok,
                            f"{detail}; jobs {jobs_text(check.jobs)}", job=None)


async def preflight(ctx: RunContext) -> None:
    manifest = ctx.manifest
    commands = tuple(command_checks(manifest.jobs))
    by_key = {check.key: check for check in commands}

    async def one(name: str) -> tuple[str, list[Any] | BaseException]:
        try:
            cwd = ctx.cwd_for(name)
            found = await ctx.hosts[name].host.preflight(
                preflight_request(manifest, cwd, commands))
            return name, explain_all(found, by_key, cwd, manifest)
        except Exception as exc:
            return name, exc

    for record in ctx.hosts.values():
        if record.stopped is not None and record.stopped.startswith("preflight:"):
            record.stopped = None
    outcomes = await asyncio.gather(*(one(name) for name in ctx.hosts))
    unusable: list[str] = []
    unusable_hosts: set[str] = set()
    for name, findings in outcomes:
        if isinstance(findings, BaseException):
            unusable.append(f"{name}: {findings}")
            unusable_hosts.add(name)
            ctx.bus.alert("error", f"{name}: preflight failed: {findings}", host=name)
            continue
        for finding in findings:
            ctx.bus.publish(PreflightReported(project=ctx.project, at=ctx.clock(), host=name,
                                              check=finding.check, ok=finding.ok,
                                              detail=finding.detail, job=finding.job))
            if finding.ok:
                continue
            if finding.check == "connection":
                unusable.append(f"{name}: {finding.detail}")
                unusable_hosts.add(name)
            elif finding.check in BLOCKING_CHECKS:
                ctx.hosts[name].stopped = f"preflight: {finding.check}: {finding.detail}"
                unusable.append(f"{name}: {finding.check}: {finding.detail}")
                unusable_hosts.add(name)
                ctx.bus.alert("error", f"{name}: preflight {finding.check}: "
                              f"{finding.detail}; no jobs will launch there", host=name)
            else:
                ctx.bus.alert("warning", f"{name}: preflight {finding.check}: "
                              f"{finding.detail}", host=name)
    jobs = ctx.ledger.jobs.values()
    if ctx.hosts and len(unusable_hosts) == len(ctx.hosts) and not any(
            job.status.is_active for job in jobs):
        raise HostError("no host can be used: " + "; ".join(unusable))
    await refuse_misfits(ctx)


async def refuse_misfits(ctx: RunContext) -> None:
    """A job waiting to launch that no host could ever run stops a run with nothing running
    (exit 3, nothing launched); beside running jobs it is an alert."""
    ledger = ctx.ledger
    specs = [ledger.specs[job.id] for job in ledger.jobs.values()
             if (job.status.is_waiting or job.status.is_held) and job.id in ledger.specs]
    if not needs_gpu_facts(specs):
        return
    totals = await probe_gpu_totals({name: record.host for name, record in ctx.hosts.items()})
    for name, found in totals.items():
        if found is not None:
            ctx.hosts[name].gpu_totals = found
    never = misfits(specs, {name: record.allowed_totals() for name, record in ctx.hosts.items()},
                    ctx.manifest.gpu_margin_mib)
    if not never:
        return
    if not any(job.status.is_active for job in ledger.jobs.values()):
        raise UnfitJobError("no host can ever run "
                            + ("this job" if len(never) == 1 else "these jobs")
                            + "; nothing launched:\n"
                            + "\n".join(f"  {misfit.line}" for misfit in never))
    for misfit in never:
        ctx.bus.alert("error", f"{misfit.job} can never launch: {misfit.detail}", job=misfit.job)
