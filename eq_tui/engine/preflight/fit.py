"""Before anything launches: a job that no allowed GPU (or host) can ever give what it asks —
`mem_mib` over the largest GPU's total (less `gpu_margin_mib` where GPUs are shared), or more
`gpus_per_job` than one host has — is refused instead of waiting forever. A host whose GPUs
are not known (unreachable, Slurm) could hold anything: with one, nothing is refused.

The GPU facts come from one probe of each host, the one every tick makes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eq_tui.engine.decide.oversize import GpuTotals
from eq_tui.engine.state.host_record import card_totals
from eq_tui.hosts.base import Host, ProbeRequest
from eq_tui.manifest.model import JobSpec


@dataclass(frozen=True)
class Misfit:
    job: str
    detail: str

    @property
    def line(self) -> str:
        return f"FAIL job {self.job}: {self.detail}"


def needs_gpu_facts(specs: Iterable[JobSpec]) -> bool:
    """Only a job with a memory figure or several GPUs can ask more than a host has."""
    return any(isinstance(spec.mem_mib, int) or spec.gpus_per_job > 1 for spec in specs)


async def probe_gpu_totals(hosts: Mapping[str, Host]) -> dict[str, dict[int, int] | None]:
    """Each host's GPUs' total memory (MiB) by index, from one probe (None: not known)."""

    async def one(host: Host) -> dict[int, int] | None:
        kind = str(getattr(host, "kind", ""))
        if kind == "slurm":
            return None  # its slots say nothing of card sizes: no probe for them
        try:
            snap = await host.probe(ProbeRequest())
        except Exception:
            return None  # unreachable: not known, never a reason to refuse
        return card_totals(snap, kind)

    found = await asyncio.gather(*(one(host) for host in hosts.values()))
    return dict(zip(hosts, found, strict=True))


def allowed_only(totals: Mapping[str, Mapping[int, int] | None],
                 allowed: Mapping[str, frozenset[int] | None]) -> dict[str, dict[int, int] | None]:
    """The GPUs a job may use on each host (its `gpus:` list)."""
    kept: dict[str, dict[int, int] | None] = {}
    for name, found in totals.items():
        only = allowed.get(name)
        kept[name] = None if found is None else {
            index: total for index, total in found.items() if only is None or index in only}
    return kept


def misfits(specs: Iterable[JobSpec], totals: GpuTotals, margin_mib: int) -> list[Misfit]:
    """The jobs no host can ever run, with the figures that say why."""
    if not totals or any(not found for found in totals.values()):
        return []
    known = {name: dict(found) for name, found in totals.items() if found}
    found_misfits = []
    for spec in specs:
        detail = _why_never(spec, known, margin_mib)
        if detail is not None:
            found_misfits.append(Misfit(spec.id, detail))
    return found_misfits


def _why_never(spec: JobSpec, totals: Mapping[str, Mapping[int, int]],
               margin_mib: int) -> str | None:
    count = spec.gpus_per_job
    if count == 0:
        return None
    most = max(len(found) for found in totals.values())
    if count > most:
        return f"gpus_per_job {count} but the most GPUs on one host is {most}"
    mem = spec.mem_mib
    if not isinstance(mem, int):
        return None
    keep = 0 if spec.exclusive else margin_mib  # a job alone on its GPUs leaves no margin
    if any(sum(1 for total in found.values() if total - keep >= mem) >= count
           for found in totals.values()):
        return None
    largest = max(total for found in totals.values() for total in found.values())
    where = ", ".join(name for name, found in totals.items() if largest in found.values())
    if largest < mem:
        return f"mem_mib {mem} but the largest GPU has {largest} MiB ({where})"
    if largest - keep < mem:
        return (f"mem_mib {mem} but the largest GPU has {largest} MiB ({where}), "
                f"{largest - keep} MiB once gpu_margin_mib {keep} is kept free")
    return f"mem_mib {mem} on each of {count} GPUs but no host has {count} GPUs that large"
