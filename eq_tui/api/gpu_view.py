"""The GPU view front ends draw: each reading plus who holds it (us, someone else, settling);
and a cluster host's nodes (GPUs allocated / total, our jobs there)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eq_tui.hosts.base import GpuProcess, GpuReading, HostSnapshot

SETTLE_WINDOW_S = 60.0  # memory still high this long after our job left it: "settling"


def holds_memory(used_mib: int | None, threshold_mib: int) -> bool:
    """Memory at or above the free threshold: someone's, or ours still draining ("settling"
    when our job has just left the GPU)."""
    return used_mib is not None and used_mib >= threshold_mib


def gpu_views(host: str, readings: tuple[GpuReading, ...], *, allowed: frozenset[int] | None,
              holders: Mapping[tuple[str, int], str], released_at: Mapping[tuple[str, int], float],
              quarantined: frozenset[int], threshold_mib: int, now: float,
              reasons: Mapping[int, str] | None = None,
              processes: tuple[GpuProcess, ...] = (),
              sharing: Mapping[int, list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """`sharing`: GPU -> our jobs on it ({"id", "mib" held or None alone, "used"}), where
    jobs are placed by memory; the first of them is also the GPU's `job`."""
    views = []
    for gpu in readings:
        key = (host, gpu.index)
        ours = (sharing or {}).get(gpu.index, [])
        job = ours[0]["id"] if ours else holders.get(key)
        busy = holds_memory(gpu.memory_used_mib, threshold_mib)
        released = released_at.get(key)
        settling = bool(job is None and busy and released is not None
                        and now - released < SETTLE_WINDOW_S)
        views.append({
            "index": gpu.index, "uuid": gpu.uuid, "name": gpu.name,
            "memory_used_mib": gpu.memory_used_mib, "memory_total_mib": gpu.memory_total_mib,
            "utilization_pct": gpu.utilization_pct,
            "allowed": allowed is None or gpu.index in allowed,
            "job": job, "other": bool(job is None and busy and not settling),
            "settling": settling, "quarantined": gpu.index in quarantined,
        })
        if ours:
            views[-1]["jobs"] = ours
        if gpu.index in quarantined:
            views[-1]["quarantine_reason"] = (reasons or {}).get(gpu.index, "")
        if views[-1]["other"]:
            views[-1]["others"] = [{"pid": p.pid, "user": p.user, "command": p.command,
                                    "used_mib": p.used_mib}
                                   for p in processes if p.gpu_uuid == gpu.uuid]
    return views


def node_views(snap: HostSnapshot | None) -> list[dict[str, Any]]:
    if snap is None:
        return []
    return [{"name": node.name, "state": node.state, "gpus_used": node.gpus_used,
             "gpus_total": node.gpus_total, "jobs": list(node.jobs)} for node in snap.nodes]
