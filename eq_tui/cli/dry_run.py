"""`--dry-run`: the expanded plan (id, phase, where it would go first, command) and preflight;
over a run dir with state, each job's status and what the manifest edit changes
(engine/preflight/existing_plan.py).

Nothing is launched and no run state is written.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from eq_tui.api.model import JobState
from eq_tui.engine.commands.rerun import rerun_command
from eq_tui.engine.decide.scheduler import GpuView, HostView, decide
from eq_tui.engine.preflight.command_words import command_checks
from eq_tui.engine.preflight.existing_plan import (
    CHANGED_SINCE,
    PlannedJob,
    existing_plan,
    placement,
)
from eq_tui.engine.preflight.fit import allowed_only, misfits, needs_gpu_facts, probe_gpu_totals
from eq_tui.engine.preflight.host_checks import explain_all, preflight_request
from eq_tui.hosts.base import Host, PreflightFinding
from eq_tui.manifest.model import Manifest
from eq_tui.manifest.search_trials import describe_search
from eq_tui.manifest.secrets import warnings as secret_warnings
from eq_tui.runfiles.statefile import StateFile

LAUNCHABLE = ("pending", "failed_oom", "held")  # statuses (as the plan shows them) that launch


def first_wave(manifest: Manifest) -> dict[str, str]:
    """Where the first jobs would go if every allowed GPU were free (later ones: wherever a GPU
    frees first)."""
    views = []
    for spec in manifest.hosts:
        count = spec.simulate.gpus if spec.simulate else 8
        indexes = spec.gpus if spec.gpus is not None else tuple(range(count))
        views.append(HostView(name=spec.name, usable=True,
                              gpus=tuple(GpuView(i, 0) for i in indexes), allowed=None,
                              max_parallel=spec.max_parallel))
    jobs = [JobState(id=s.id, phase=s.phase, cmd=s.cmd) for s in manifest.jobs]
    # where jobs go once every secret is there (a missing one is a warning of its own)
    decision = decide(dataclasses.replace(manifest, env={}), jobs, views, now=0.0, paused=False,
                      preconditions={s.id: True for s in manifest.jobs})
    return {x.job_id: placement(x.host, x.gpus) for x in decision.launches}


async def _fit(manifest: Manifest, hosts: dict[str, Host],
               to_launch: set[str]) -> list[PreflightFinding]:
    """A `fit` finding for each job that no host could ever run."""
    specs = [spec for spec in manifest.jobs if spec.id in to_launch]
    if not needs_gpu_facts(specs):
        return []
    allowed = {h.name: frozenset(h.gpus) if h.gpus is not None else None for h in manifest.hosts}
    totals = allowed_only(await probe_gpu_totals(hosts), allowed)
    return [PreflightFinding(host="", check="fit", ok=False, detail=misfit.detail, job=misfit.job)
            for misfit in misfits(specs, totals, manifest.gpu_margin_mib)]


async def _preflight(manifest: Manifest, ssh_config: str | None,
                     to_launch: set[str]) -> list[PreflightFinding]:
    """`to_launch`: the jobs that may still launch (the fit of the others is not checked)."""
    from eq_tui.hosts.factory import job_cwd, make_hosts

    findings: list[PreflightFinding] = []
    commands = tuple(command_checks(manifest.jobs))
    by_key = {check.key: check for check in commands}
    with tempfile.TemporaryDirectory(prefix="eq-tui-dryrun-") as scratch:
        hosts = make_hosts(manifest, Path(scratch), ssh_config=ssh_config)
        try:
            for name, host in hosts.items():
                spec = next(h for h in manifest.hosts if h.name == name)
                try:
                    cwd = job_cwd(spec, manifest)
                    found = await host.preflight(preflight_request(manifest, cwd, commands))
                    findings += explain_all(found, by_key, cwd, manifest)
                except Exception as exc:
                    findings.append(PreflightFinding(host=name, check="connection", ok=False,
                                                     detail=str(exc)))
            findings += await _fit(manifest, hosts, to_launch)
        finally:
            for host in hosts.values():
                await host.close()
    return findings


def _plan(manifest: Manifest, run_dir: Path) -> tuple[list[PlannedJob], dict[str, Any] | None]:
    saved = StateFile(run_dir).load() if (run_dir / "queue_state.json").exists() else None
    if saved is not None:
        return existing_plan(manifest, saved), saved
    placement = first_wave(manifest)
    return [PlannedJob(s.id, s.phase, s.cmd, "pending", placement.get(s.id, "next free GPU"))
            for s in manifest.jobs], None


def _counts(plan: list[PlannedJob]) -> str:
    counts = Counter(p.status.split(" ")[0] for p in plan if not p.note.startswith("retired"))
    return ", ".join(f"{n} {status}" for status, n in counts.items())


async def print_plan(manifests: list[Manifest], run_dirs: list[Path], *,
                     as_json: bool = False, ssh_config: str | None = None) -> int:
    failed = False
    for manifest, run_dir in zip(manifests, run_dirs, strict=True):
        plan, saved = _plan(manifest, run_dir)
        to_launch = {p.id for p in plan if p.status.split(" ")[-1] in LAUNCHABLE}
        findings = await _preflight(manifest, ssh_config, to_launch)
        failed = failed or any(not f.ok for f in findings)
        specs = manifest.job_specs
        changed = [p.id for p in plan if p.note.startswith(CHANGED_SINCE)]
        rerun = rerun_command(manifest.source, "--rerun-changed", run_dir, manifest.project)
        if as_json:
            print(json.dumps({
                "project": manifest.project, "run_dir": str(run_dir),
                "existing": saved is not None,
                "jobs": [{"id": p.id, "phase": p.phase, "status": p.status,
                          "first": p.where or None, "note": p.note or None, "cmd": p.cmd,
                          "output_check": specs[p.id].output_check if p.id in specs else None}
                         for p in plan],
                "changed_since_completed": changed,
                "rerun_changed": rerun if changed else None,
                "preflight": [f.__dict__ for f in findings],
                "warnings": secret_warnings(manifest)}, indent=1))
            continue
        existing = f" (existing: {_counts(plan)})" if saved is not None else ""
        print(f"project {manifest.project}: {len(manifest.jobs)} "
              f"{'job' if len(manifest.jobs) == 1 else 'jobs'}, "
              f"{len(manifest.phases)} phase(s), hosts "
              f"{', '.join(h.name + ' (' + h.kind + ')' for h in manifest.hosts)}; "
              f"run dir {run_dir}{existing}")
        for phase in manifest.phases:
            if phase.search is not None:
                print(f"  search {describe_search(phase.search)}")
        width = max((len(p.id) for p in plan), default=2)
        status_width = max((len(p.status) for p in plan), default=7) if saved else 0
        for p in plan:
            status = f"{p.status:<{status_width}} " if saved is not None else ""
            note = f"  [{p.note}]" if p.note else ""
            print(f"  {p.id:<{width}}  {p.phase:<12} {status}{p.where or '-':<14} "
                  f"{p.cmd}{note}")
        if changed:
            print(f"{len(changed)} completed job(s) ran a command the manifest has changed since "
                  f"({', '.join(changed)}): their results are of the old one. Run them again "
                  f"with the manifest's: {rerun}  (add --detach for the background; one job: "
                  f"eq-tui edit {shlex.quote(str(run_dir))} JOB -- 'NEW COMMAND')")
        print("preflight:")
        for finding in findings:
            if finding.check == "fit":
                print(f"  FAIL job {finding.job}: {finding.detail}")
                continue
            mark = "ok  " if finding.ok else "FAIL"
            job = f" [{finding.job}]" if finding.job else ""
            print(f"  {mark} {finding.host}: {finding.check}{job}: {finding.detail}".rstrip())
        for warning in secret_warnings(manifest):
            print(f"warning: {warning}")
    return 3 if failed else 0
