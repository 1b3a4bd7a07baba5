"""A job's definition as JSON, for the jobs made while the queue runs (added, cloned,
reloaded): the state file keeps it, so such a job survives a restart with the original
manifest."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from eq_tui.manifest.model import JobSpec, Precondition


def spec_to_json(spec: JobSpec) -> dict[str, Any]:
    return asdict(spec)


def spec_from_json(data: dict[str, Any]) -> JobSpec:
    return JobSpec(
        id=str(data["id"]), phase=str(data["phase"]), cmd=str(data["cmd"]),
        output_check=data.get("output_check"),
        preconditions=tuple(Precondition(type=p.get("type", "checkpoint_exists"),
                                         path=str(p["path"]))
                            for p in data.get("preconditions") or ()),
        gpus_per_job=int(data.get("gpus_per_job") or 1),
        priority=int(data.get("priority") or 0))


def same_definition(a: JobSpec, b: JobSpec) -> bool:
    """Whether a reload changes what the job runs (its priority is compared apart)."""
    return replace(a, priority=0) == replace(b, priority=0)
