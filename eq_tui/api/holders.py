"""Who holds each GPU, in plain sight: our jobs, other eq-tui users' jobs (from their claims on
the host: user, project, job) and other processes (user and command, from the probe's `ps`).
Each GPU view carries a `holders` list; `describe` and `holders_text` say them in words for the
grid, the details screen and `eq-tui status --gpus`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from eq_tui.hosts.base import HostSnapshot
from eq_tui.hosts.claims import others

Holder = dict[str, Any]


def holders_of(gpu: Mapping[str, Any], snap: HostSnapshot, ours: Iterable[int],
               project: str, token: str) -> list[Holder]:
    """The holders of one GPU view (`ours`: our attempts' process groups on the host).
    Ours first, then other engines' jobs, then other processes; a process of another engine's
    job counts in that job's entry, never as a process of its own."""
    index, uuid = gpu.get("index"), gpu.get("uuid")
    found: list[Holder] = []
    shared = gpu.get("jobs") or []
    if shared:
        found += [{"kind": "ours", "job": job["id"], "mib": job.get("mib"),
                   "used_mib": job.get("used")} for job in shared]
    elif gpu.get("job"):
        found.append({"kind": "ours", "job": gpu["job"]})
    groups = set(ours)
    claims = [c for c in others(snap.claims, project, token) if c.gpu == index]
    on_gpu = [p for p in snap.processes if p.gpu_uuid == uuid]
    seen_jobs: dict[tuple[str, str, str, int], Holder] = {}
    for claim in claims:
        key = (claim.user, claim.project, claim.job, claim.attempt)
        used = sum(p.used_mib or 0 for p in on_gpu if claim.pid in (p.pgid, p.sid))
        if key not in seen_jobs:
            seen_jobs[key] = {"kind": "eq-tui", "user": claim.user, "project": claim.project,
                              "job": claim.job, "attempt": claim.attempt, "mib": claim.mib,
                              "used_mib": used}
            found.append(seen_jobs[key])
    claimed = {c.pid for c in claims}
    for process in on_gpu:
        if {process.pgid, process.sid} & (groups | claimed) - {None}:
            continue
        found.append({"kind": "process", "pid": process.pid, "user": process.user,
                      "command": process.command, "used_mib": process.used_mib})
    return found


def _gib(mib: Any) -> str:
    return f"{mib / 1024:.1f}G" if isinstance(mib, int) else ""


def describe(holder: Mapping[str, Any]) -> str:
    """One holder in words: `ours: j3`, `bob's nlp/j7 (6.0G)`, `pid 4242 alice python eval.py`."""
    kind = holder.get("kind")
    if kind == "ours":
        return f"ours: {holder.get('job')}"
    if kind == "eq-tui":
        used = holder.get("used_mib") or holder.get("mib")
        size = f" ({_gib(used)})" if _gib(used) else ""
        return f"{holder.get('user')}'s {holder.get('project')}/{holder.get('job')}{size}"
    command = str(holder.get("command") or "").split()
    program = " ".join([command[0].split("/")[-1], *command[1:2]]) if command else ""
    size = f" ({_gib(holder.get('used_mib'))})" if _gib(holder.get("used_mib")) else ""
    return f"pid {holder.get('pid')} {holder.get('user') or '?'} {program}".rstrip() + size


def theirs(gpu: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The holders that are not ours."""
    return [h for h in gpu.get("holders") or [] if h.get("kind") != "ours"]


def holders_text(gpu: Mapping[str, Any], *, first_only: bool = False) -> str:
    """The GPU's holders that are not ours, in words (the first and `+N` with first_only)."""
    named = [describe(h) for h in theirs(gpu)]
    if not named:
        return ""
    if first_only:
        return named[0] + (f" +{len(named) - 1}" if len(named) > 1 else "")
    return "; ".join(named)


def gpu_holder_lines(hosts: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per GPU of each host: `box1 GPU 0  3.2/24.0G  ours: j3; bob's nlp/j7 (6.0G)`."""
    lines = []
    for host in hosts:
        for gpu in host.get("gpus") or []:
            names = [describe(h) for h in gpu.get("holders") or []]
            if not names and gpu.get("job"):
                names = [f"ours: {gpu['job']}"]
            used, total = gpu.get("memory_used_mib"), gpu.get("memory_total_mib")
            memory = f"{_gib(used) or '?'}/{_gib(total) or '?'}"
            state = "quarantined" if gpu.get("quarantined") else (
                "drained" if gpu.get("drained") else  # a person's `eq-tui drain`
                "not ours to use" if not gpu.get("allowed", True) else "")
            what = "; ".join(names) or ("free" if not gpu.get("other") else "someone's memory")
            lines.append(f"{host.get('name')} GPU {gpu.get('index')}  {memory}  {what}"
                         + (f"  [{state}]" if state else ""))
    return lines


def job_gpu_lines(job: Mapping[str, Any], hosts: Mapping[str, Mapping[str, Any]],
                  most: int = 8) -> list[str]:
    """For a job's details: who holds its GPUs (beside it) while it runs; while it waits, who
    holds the GPUs that others hold (why it waits there). At most `most` lines."""
    status = str(job.get("status", ""))
    where = job.get("host")
    if status in ("launching", "running") and where in hosts:
        wanted = {(where, g) for g in job.get("gpus") or []}
        chosen = [{**hosts[str(where)], "gpus": [g for g in hosts[str(where)].get("gpus") or []
                                                 if (where, g.get("index")) in wanted]}]
    elif status in ("pending", "failed_oom"):
        chosen = [{**host, "gpus": [g for g in host.get("gpus") or [] if theirs(g)]}
                  for host in hosts.values()]
    else:
        return []
    lines = gpu_holder_lines(chosen)
    return lines[:most] + ([f"... {len(lines) - most} more"] if len(lines) > most else [])
