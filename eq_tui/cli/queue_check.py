"""A queue verb checked against the run's jobs before it is sent, and before any engine is
started for it: a job id the run does not have (with the nearest one it has), a `--set` flag
the job's command does not have. Exit 2, as any usage error; a typo never starts an engine."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from eq_tui.api.command_args import unknown_flag
from eq_tui.api.commands import Clone, Drain, Edit, Undrain
from eq_tui.cli.detach import recorded_manifest
from eq_tui.cli.queue_verbs import Request
from eq_tui.errors import EqTuiError, UsageError
from eq_tui.manifest.loader import load_manifest
from eq_tui.runfiles.statefile import StateFile


def check_request(request: Request, jobs: Iterable[Mapping[str, Any]]) -> None:
    """UsageError when `request` names a job that is not among `jobs` (the run's job records:
    the state file's or a running engine's snapshot) or sets a flag its command lacks."""
    commands = {str(job.get("id")): str(job.get("cmd") or "") for job in jobs}
    for job_id in request.jobs:
        if job_id not in commands:
            raise UsageError(_no_job(request, job_id, list(commands)))
    command = request.command
    if not isinstance(command, (Edit, Clone)) or not command.sets:
        return
    for job_id in request.jobs:
        cmd = commands[job_id] if command.cmd is None else str(command.cmd)
        problem = unknown_flag(cmd, {str(k): str(v) for k, v in command.sets.items()})
        if problem is not None:
            raise UsageError(f"{request.verb} {job_id}: {problem}; nothing was changed")


def check_host(request: Request, hosts: Iterable[Mapping[str, Any]]) -> None:
    """UsageError when a drain or undrain names a host the run does not have, or a GPU the
    host is known not to have (`hosts`: a running engine's snapshot's, or the manifest's
    names alone)."""
    command = request.command
    if not isinstance(command, Drain | Undrain):
        return
    known = {str(host.get("name")): host for host in hosts}
    host = known.get(command.host)
    if host is None:
        near = difflib.get_close_matches(command.host, list(known), n=1, cutoff=0.0)
        hint = f" — did you mean {near[0]!r}?" if near else ""
        raise UsageError(f"{request.verb}: no host {command.host!r} in {request.where}{hint} "
                         f"(its hosts: {', '.join(known) or 'none'})")
    gpus = {int(gpu["index"]) for gpu in host.get("gpus") or ()
            if isinstance(gpu, Mapping) and isinstance(gpu.get("index"), int)
            and gpu.get("allowed", True)}
    if isinstance(command, Drain) and command.only_gpus and gpus:
        unknown = sorted(set(command.only_gpus) - gpus)
        if unknown:
            raise UsageError(f"drain: {command.host} has no GPU "
                             f"{','.join(map(str, unknown))} of ours (it has "
                             f"{','.join(map(str, sorted(gpus)))})")


def _no_job(request: Request, job_id: str, ids: list[str]) -> str:
    near = difflib.get_close_matches(job_id, ids, n=1, cutoff=0.0)
    hint = f" — did you mean {near[0]!r}?" if near else " (it has no jobs)"
    return (f"{request.verb}: no job {job_id!r} in {request.where}{hint} (`eq-tui status "
            f"{request.where} --jobs` lists its {len(ids)} jobs)")


def check_saved(request: Request, run_dir: Path) -> None:
    """check_request against the jobs an engine started for the run would have: its state
    file's, and the new ones of the manifest it records (an engine adds those as it starts).
    A run whose state or manifest cannot be read is left for the engine to judge. A drain's
    host is checked against the manifest's hosts."""
    if isinstance(request.command, Drain | Undrain):
        try:
            source = recorded_manifest(run_dir)
            hosts = load_manifest(source).hosts if source and Path(source).is_file() else None
        except (EqTuiError, OSError):
            return
        if hosts is not None:
            check_host(request, ({"name": host.name} for host in hosts))
        return
    if not request.jobs:
        return
    try:
        saved = StateFile(run_dir).load()
        source = recorded_manifest(run_dir)
        written = load_manifest(source).jobs if source and Path(source).is_file() else ()
    except (EqTuiError, OSError):
        return
    if saved is None or not isinstance(saved.get("jobs"), list):
        return
    jobs: dict[str, Mapping[str, Any]] = {spec.id: {"id": spec.id, "cmd": spec.cmd}
                                          for spec in written}
    jobs.update((str(job.get("id")), job) for job in saved["jobs"] if isinstance(job, Mapping))
    check_request(request, jobs.values())
