"""A job's definition as JSON, for the jobs made while the queue runs (added, cloned,
reloaded): the state file keeps it, so such a job survives a restart with the original
manifest."""

from __future__ import annotations

from dataclasses import asdict, fields, replace
from typing import Any, Literal

from eq_tui.manifest.model import CheckpointSpec, JobSpec, MetricsSpec, Precondition
from eq_tui.manifest.sharing import MEM_MIB_HINT, mem_mib_value

_METRICS_FIELDS = frozenset(f.name for f in fields(MetricsSpec))


def spec_to_json(spec: JobSpec) -> dict[str, Any]:
    return asdict(spec)


def spec_from_json(data: dict[str, Any]) -> JobSpec:
    """Every field of spec_to_json's; a record written before a field existed gets its
    default (and the family of its phase)."""
    metrics = data.get("metrics")
    stall_after = data.get("stall_after")
    gpus = data.get("gpus_per_job")
    checkpoint = data.get("checkpoint")
    return JobSpec(
        id=str(data["id"]), phase=str(data["phase"]), cmd=str(data["cmd"]),
        output_check=data.get("output_check"),
        preconditions=tuple(Precondition(type=p.get("type", "checkpoint_exists"),
                                         path=str(p["path"]))
                            for p in data.get("preconditions") or ()),
        gpus_per_job=1 if gpus is None else int(gpus),
        metrics=MetricsSpec(**{k: v for k, v in metrics.items() if k in _METRICS_FIELDS})
        if isinstance(metrics, dict) else None,
        params=tuple((str(key), str(value)) for key, value in data.get("params") or ()),
        priority=int(data.get("priority") or 0),
        stall_after=None if stall_after is None else float(stall_after),
        on_stall=str(data.get("on_stall") or "alert"),
        mem_mib=mem_mib_value(data.get("mem_mib")),
        exclusive=data.get("exclusive") is True,
        family=str(data.get("family") or ""),
        checkpoint=CheckpointSpec(path=str(checkpoint["path"]), resume=str(checkpoint["resume"]),
                                  signal=str(checkpoint.get("signal") or "TERM"),
                                  grace=float(checkpoint.get("grace", 60.0)))
        if isinstance(checkpoint, dict) else None,
        preempt="force" if data.get("preempt") == "force" else data.get("preempt") is True,
        max_preemptions=int(data.get("max_preemptions", 3)),
        retry_lost=int(data.get("retry_lost", 1)))


def same_definition(a: JobSpec, b: JobSpec) -> bool:
    """Whether a reload changes what the job runs or how it is placed (mem_mib, exclusive,
    its GPUs); its priority is compared apart."""
    return replace(a, priority=0) == replace(b, priority=0)


def sharing_args(args: dict[str, Any], gpus: int, mem_mib: int | Literal["auto"] | None,
                 exclusive: bool) -> tuple[int | Literal["auto"] | None, bool] | str:
    """The `mem_mib` and `exclusive` of a job added or cloned at run time: those in `args`
    over the given ones (the manifest's top level, or the clone's source), or why not. As in
    the manifest, a job with no GPU drops the inherited ones and refuses its own."""
    own_mem, own_exclusive = "mem_mib" in args, "exclusive" in args
    if own_mem:
        mem_mib = mem_mib_value(args["mem_mib"])
        if mem_mib is None:
            return f"mem_mib {MEM_MIB_HINT}, not {args['mem_mib']!r}"
    if own_exclusive:
        if not isinstance(args["exclusive"], bool):
            return f"exclusive must be true or false, not {args['exclusive']!r}"
        exclusive = args["exclusive"]
    if gpus > 0:
        return mem_mib, exclusive
    if own_mem:
        return "mem_mib: GPU memory for a job that takes no GPU (gpus_per_job 0)"
    if own_exclusive and exclusive:
        return "exclusive: exclusive GPUs for a job that takes no GPU (gpus_per_job 0)"
    return None, False
