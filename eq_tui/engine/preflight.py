"""Before the first tick: every host checked (connection, cwd, conda env, launcher). A host
that fails a check that would fail every job there takes no launches; if no host can be used
and nothing runs, the run stops here."""

from __future__ import annotations

import asyncio
from typing import Any

from eq_tui.engine.context import RunContext
from eq_tui.engine.events import PreflightReported
from eq_tui.errors import HostError
from eq_tui.hosts.base import PreflightRequest

BLOCKING_CHECKS = ("cwd", "conda", "launcher")


async def preflight(ctx: RunContext) -> None:
    manifest = ctx.manifest

    async def one(name: str) -> tuple[str, list[Any] | BaseException]:
        try:
            request = PreflightRequest(cwd=ctx.cwd_for(name), conda=manifest.conda,
                                       conda_hook=manifest.conda_hook,
                                       launcher=manifest.launcher)
            return name, await ctx.hosts[name].host.preflight(request)
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
                ctx.bus.alert("error", f"{name}: preflight {finding.check} failed: "
                              f"{finding.detail}; no jobs will launch there", host=name)
            else:
                ctx.bus.alert("warning", f"{name}: preflight {finding.check}: "
                              f"{finding.detail}", host=name)
    jobs = ctx.ledger.jobs.values()
    if ctx.hosts and len(unusable_hosts) == len(ctx.hosts) and not any(
            job.status.is_active for job in jobs):
        raise HostError("no host can be used: " + "; ".join(unusable))
