"""`--dry-run`: the expanded plan (id, phase, where it would go first, command) and preflight.

Nothing is launched and no run state is written.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from eq_tui.engine.command_words import command_checks
from eq_tui.engine.model import JobState
from eq_tui.engine.preflight import explain, preflight_request
from eq_tui.engine.scheduler import GpuView, HostView, decide
from eq_tui.hosts.base import PreflightFinding
from eq_tui.manifest.model import Manifest


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
    decision = decide(manifest, jobs, views, now=0.0, paused=False,
                      preconditions={s.id: True for s in manifest.jobs})
    return {x.job_id: f"{x.host}:{','.join(map(str, x.gpus))}" for x in decision.launches}


async def _preflight(manifest: Manifest) -> list[PreflightFinding]:
    from eq_tui.hosts.factory import make_hosts

    findings: list[PreflightFinding] = []
    commands = tuple(command_checks(manifest.jobs))
    by_key = {check.key: check for check in commands}
    with tempfile.TemporaryDirectory(prefix="eq-tui-dryrun-") as scratch:
        hosts = make_hosts(manifest, Path(scratch))
        try:
            for name, host in hosts.items():
                spec = next(h for h in manifest.hosts if h.name == name)
                cwd = manifest.cwd or (str(Path(manifest.source).resolve().parent)
                                       if spec.kind in ("local", "sim") else None)
                try:
                    found = await host.preflight(preflight_request(manifest, cwd, commands))
                    findings += [explain(f, by_key, cwd, manifest) for f in found]
                except Exception as exc:
                    findings.append(PreflightFinding(host=name, check="connection", ok=False,
                                                     detail=str(exc)))
        finally:
            for host in hosts.values():
                await host.close()
    return findings


async def print_plan(manifests: list[Manifest], run_dirs: list[Path], *,
                     as_json: bool = False) -> int:
    failed = False
    for manifest, run_dir in zip(manifests, run_dirs, strict=True):
        placement = first_wave(manifest)
        findings = await _preflight(manifest)
        failed = failed or any(not f.ok for f in findings)
        if as_json:
            print(json.dumps({
                "project": manifest.project, "run_dir": str(run_dir),
                "jobs": [{"id": s.id, "phase": s.phase, "first": placement.get(s.id),
                          "cmd": s.cmd, "output_check": s.output_check} for s in manifest.jobs],
                "preflight": [f.__dict__ for f in findings]}, indent=1))
            continue
        print(f"project {manifest.project}: {len(manifest.jobs)} jobs, "
              f"{len(manifest.phases)} phase(s), hosts "
              f"{', '.join(h.name + ' (' + h.kind + ')' for h in manifest.hosts)}; "
              f"run dir {run_dir}")
        width = max((len(s.id) for s in manifest.jobs), default=2)
        for spec in manifest.jobs:
            where = placement.get(spec.id, "next free GPU")
            print(f"  {spec.id:<{width}}  {spec.phase:<12} {where:<14} {spec.cmd}")
        print("preflight:")
        for finding in findings:
            mark = "ok  " if finding.ok else "FAIL"
            job = f" [{finding.job}]" if finding.job else ""
            print(f"  {mark} {finding.host}: {finding.check}{job}: {finding.detail}".rstrip())
    return 3 if failed else 0
