"""What the engine knows about each host: the link, the last probe, and what it decided about
the host (GPUs quarantined, launching stopped). One record per host instead of a dict each."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eq_tui.hosts.base import Host, HostSnapshot
from eq_tui.manifest.model import HostSpec

LinkState = str  # "connecting" | "up" | "down"


@dataclass
class HostLink:
    state: LinkState
    since: float
    reason: str = ""
    rtt_s: float | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "reason": self.reason, "since": self.since,
                "rtt_s": self.rtt_s}


@dataclass
class HostRecord:
    name: str
    host: Host
    spec: HostSpec | None
    link: HostLink
    snapshot: HostSnapshot | None = None
    probes: int = 0  # probe round trips asked, for tests and benchmarks
    log_root: str | None = None
    output_scanned: bool = False  # its first probe checked pending jobs' outputs
    quarantined: set[int] = field(default_factory=set)
    quarantine_reasons: dict[int, str] = field(default_factory=dict)  # why, per GPU
    stopped: str | None = None  # why nothing launches there (disk full, preflight), if so
    # A person's `eq-tui drain`: the "cordon" (named so, never "drain", which inside the engine
    # is the wait for a GPU's memory to go before a launch: drain_launch.py). None: not
    # drained; "all": the whole host (CPU-only jobs too); else the GPUs drained.
    cordon: str | frozenset[int] | None = None
    cores: int | None = None  # CPU cores, once a probe counted them
    # each GPU's total memory (MiB) as the last probe that listed GPUs read it (kept while the
    # host is down)
    gpu_totals: dict[int, int] | None = None

    @property
    def max_cpu_jobs(self) -> int:
        """CPU-only jobs at once: the manifest's, else half the cores (1 until counted)."""
        if self.spec is not None and self.spec.max_cpu_jobs is not None:
            return self.spec.max_cpu_jobs
        return max(1, self.cores // 2) if self.cores else 1

    @property
    def kind(self) -> str:
        return self.spec.kind if self.spec else "local"

    @property
    def allowed(self) -> frozenset[int] | None:
        return frozenset(self.spec.gpus) if self.spec and self.spec.gpus is not None else None

    def cordoned(self) -> frozenset[int]:
        """The GPUs a drain keeps launches from (every GPU known here for a whole host)."""
        if self.cordon is None:
            return frozenset()
        if isinstance(self.cordon, str):
            known = self.gpu_totals or {}
            listed = {g.index for g in self.snapshot.gpus} if self.snapshot else set()
            return frozenset(known) | frozenset(listed)
        return frozenset(self.cordon)

    def cordon_json(self) -> str | list[int] | None:
        return self.cordon if self.cordon is None or isinstance(self.cordon, str) \
            else sorted(self.cordon)

    def note_gpus(self, snap: HostSnapshot) -> None:
        totals = card_totals(snap, self.kind)
        if totals is not None:
            self.gpu_totals = totals

    def allowed_totals(self) -> dict[int, int] | None:
        """The total memory of each GPU a job may use here (None: not known yet)."""
        if self.gpu_totals is None:
            return None
        allowed = self.allowed
        return {index: total for index, total in self.gpu_totals.items()
                if allowed is None or index in allowed}


def card_totals(snap: HostSnapshot, kind: str) -> dict[int, int] | None:
    """Each GPU's total memory (MiB) by index, as this probe read it; None when it says nothing
    of card sizes (a failed probe, no readings, a Slurm host's slots, which are placeholders)."""
    if kind == "slurm" or not snap.ok:
        return None
    totals = {g.index: g.memory_total_mib for g in snap.gpus if g.memory_total_mib}
    return totals or None
