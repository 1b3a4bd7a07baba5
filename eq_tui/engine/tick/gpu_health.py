"""GPU health: quarantining a GPU that is going bad, and releasing it when a person says so.

A GPU is quarantined, with its reason, when its uncorrected ECC error count grows between two
readings, when it has retired pages pending, when it is no longer listed by nvidia-smi (it
fell off the bus), or when two jobs end with a `gpu_fault` on it within FAULT_WINDOW_S. Nothing
launches on a quarantined GPU (the scheduler's host views carry the set) until `release`; the
quarantine and its reasons are in the state file, and the readings changes are judged against
(and recent GPU faults) in gpu_health.json, so all of it outlasts an engine restart.

The health queries cost a second nvidia-smi call, so a host's probe asks for them at most every
HEALTH_EVERY_S; whether every GPU is still listed is read from every probe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from eq_tui.api.events import GpuQuarantined
from eq_tui.api.model import JobState
from eq_tui.engine.context import RunContext
from eq_tui.hosts.base import HostSnapshot
from eq_tui.runfiles.atomic import write_atomic

HEALTH_EVERY_S = 30.0
HEALTH_FILE = "gpu_health.json"  # in the run dir: the last readings, GPU faults
FAULT_WINDOW_S = 3600.0
FAULTS_TO_QUARANTINE = 2


@dataclass
class HostHealth:
    listed: dict[str, int] = field(default_factory=dict)  # uuid -> index, every GPU seen
    ecc: dict[str, int] = field(default_factory=dict)  # uuid -> last uncorrected count
    faults: dict[int, list[float]] = field(default_factory=dict)  # GPU -> gpu_fault ends
    asked_at: float | None = None


class GpuHealthWatch:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self._saved = ""
        self.hosts: dict[str, HostHealth] = {name: HostHealth() for name in ctx.hosts}
        self.every_s = HEALTH_EVERY_S
        self.path = ctx.run_dir.path / HEALTH_FILE
        self._load()

    # ---- what outlasts a restart: the readings a change is judged against ----------------------

    def _load(self) -> None:
        try:
            saved = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        for name, data in (saved.get("hosts") or {}).items():
            health = self.hosts.setdefault(str(name), HostHealth())
            health.listed = {str(k): int(v) for k, v in (data.get("listed") or {}).items()}
            health.ecc = {str(k): int(v) for k, v in (data.get("ecc") or {}).items()}
            health.faults = {int(k): [float(t) for t in v]
                             for k, v in (data.get("faults") or {}).items()}

    def _save(self) -> None:
        data = {"hosts": {name: {"listed": h.listed, "ecc": h.ecc,
                                 "faults": {str(k): v for k, v in h.faults.items()}}
                          for name, h in self.hosts.items()}}
        text = json.dumps(data, sort_keys=True)
        if text != self._saved:
            write_atomic(self.path, text)
            self._saved = text

    def want_health(self, host: str) -> bool:
        """Whether this probe of the host should read the GPUs' health (and note it asked)."""
        health = self.hosts.setdefault(host, HostHealth())
        now = self.ctx.clock()
        if health.asked_at is not None and now - health.asked_at < self.every_s:
            return False
        health.asked_at = now
        return True

    def check(self, probed: set[str]) -> None:
        for name in probed:
            record = self.ctx.hosts.get(name)
            snap = record.snapshot if record is not None else None
            if snap is not None and snap.ok and snap.gpus:
                self._check_host(name, snap)
        self._save()

    def _check_host(self, name: str, snap: HostSnapshot) -> None:
        health = self.hosts.setdefault(name, HostHealth())
        listed = {gpu.uuid: gpu.index for gpu in snap.gpus if gpu.uuid}
        for uuid, index in health.listed.items():
            if uuid not in listed:
                quarantine(self.ctx, name, index, f"GPU {index} ({uuid}) is no longer listed "
                           "by nvidia-smi (fell off the bus?)")
        health.listed.update(listed)
        for reading in snap.health:
            before = health.ecc.get(reading.uuid)
            if reading.ecc_uncorrected is not None:
                if before is not None and reading.ecc_uncorrected > before:
                    quarantine(self.ctx, name, reading.index,
                               f"uncorrected ECC errors grew from {before} to "
                               f"{reading.ecc_uncorrected}")
                health.ecc[reading.uuid] = reading.ecc_uncorrected
            if reading.pages_pending:
                quarantine(self.ctx, name, reading.index,
                           "retired pages pending (the GPU needs a reset)")

    def note_fault(self, job: JobState) -> None:
        """A job's attempt ended with a gpu_fault on its GPUs: the second within the window
        on a GPU quarantines it."""
        if job.host is None:
            return
        now = self.ctx.clock()
        health = self.hosts.setdefault(job.host, HostHealth())
        for gpu in job.gpus:
            recent = [t for t in health.faults.get(gpu, []) if now - t < FAULT_WINDOW_S]
            recent.append(now)
            health.faults[gpu] = recent
            self._save()
            if len(recent) >= FAULTS_TO_QUARANTINE:
                quarantine(self.ctx, job.host, gpu,
                           f"{len(recent)} jobs ended with a GPU fault there within an hour "
                           f"(last: {job.id})", job=job.id)


def quarantine(ctx: RunContext, host: str, gpu: int, reason: str, *,
               job: str | None = None) -> None:
    record = ctx.hosts[host]
    if gpu in record.quarantined:
        return
    record.quarantined.add(gpu)
    record.quarantine_reasons[gpu] = reason
    ctx.ledger.unsaved = True
    ctx.bus.publish(GpuQuarantined(project=ctx.project, at=ctx.clock(), host=host, gpu=gpu,
                                   reason=reason))
    ctx.bus.alert("error", f"{host}: GPU {gpu} quarantined: {reason}; nothing launches there "
                  "until it is released (release-gpu)", host=host, job=job)


def release(ctx: RunContext, host: str, gpu: int) -> str:
    """A person releases a quarantined GPU: "ok", or why not."""
    record = ctx.hosts.get(host)
    if record is None:
        return f"no host {host!r}"
    if gpu not in record.quarantined:
        return f"GPU {gpu} of {host} is not quarantined"
    record.quarantined.discard(gpu)
    reason = record.quarantine_reasons.pop(gpu, "")
    ctx.ledger.unsaved = True
    ctx.bus.publish(GpuQuarantined(project=ctx.project, at=ctx.clock(), host=host, gpu=gpu,
                                   reason=reason, released=True))
    ctx.bus.alert("info", f"{host}: GPU {gpu} released from quarantine", host=host)
    return "ok"
