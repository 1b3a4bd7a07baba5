"""Jobs whose CUDA OOM asked more than their card holds (`min_gpu_mib`) go only to larger GPUs:
the host views such a job may see, and the views left for the other jobs once it is placed.
Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from eq_tui.engine.decide.oversize import gib
from eq_tui.engine.decide.placement import HostView, Launch


def larger_than(hosts: Sequence[HostView], floor_mib: int) -> list[HostView]:
    """Each host with only its allowed GPUs whose total memory is more than `floor_mib`."""
    views = []
    for host in hosts:
        allowed = frozenset(
            gpu.index for gpu in host.gpus
            if gpu.memory_total_mib is not None and gpu.memory_total_mib > floor_mib
            and (host.allowed is None or gpu.index in host.allowed))
        views.append(replace(host, allowed=allowed))
    return views


def without(hosts: Sequence[HostView], launches: Sequence[Launch]) -> list[HostView]:
    """The hosts as the rest of this tick sees them after `launches`: the GPUs they took are
    off limits (shared or not; the next probe shows what room is left) and each launch takes
    a job slot of its host."""
    if not launches:
        return list(hosts)
    taken = {(launch.host, gpu) for launch in launches for gpu in launch.gpus}
    started = Counter(launch.host for launch in launches)
    views = []
    for host in hosts:
        if not started[host.name]:
            views.append(host)
            continue
        allowed = frozenset(gpu.index for gpu in host.gpus
                            if (host.allowed is None or gpu.index in host.allowed)
                            and (host.name, gpu.index) not in taken)
        views.append(replace(host, allowed=allowed,
                             max_parallel=max(0, host.max_parallel - started[host.name])))
    return views


def floor_reason(reason: str | None, floor_mib: int) -> str:
    needs = f"needs a GPU with more than {gib(floor_mib)} (its last CUDA OOM asked that much)"
    return f"{reason}; {needs}" if reason else needs
