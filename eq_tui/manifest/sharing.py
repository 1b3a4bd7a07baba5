"""The keys that pack several jobs onto one GPU by memory: a job's `mem_mib` (its peak memory
per GPU in MiB, or `auto`: learned from its siblings' runs) and `exclusive` (its GPUs alone),
set at the top level, in a phase, in a template or on a job (the nearest wins, as with
`gpus_per_job`); a host's `max_jobs_per_gpu` and `max_cpu_jobs` (also top-level defaults for
the hosts, as `max_parallel`); the top level's `gpu_margin_mib`.

A job with `gpus_per_job: 0` takes no GPU. GPU memory or exclusivity written for it at the
same place as that 0, or nearer the job, contradicts it and is an error; written further out
(a top-level default, say), the nearer 0 wins and the job simply has neither.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from eq_tui.manifest import schema
from eq_tui.manifest.model import MemMib
from eq_tui.manifest.schema import Context
from eq_tui.manifest.yaml_lines import Path_

MEM_MIB_HINT = "must be a whole number of MiB (e.g. 18000) or auto"
DEFAULT_MARGIN_MIB = 1024


@dataclass(frozen=True)
class Sharing:
    """`mem_mib` and `exclusive` in effect at a scope, and where each was written (`()`:
    nowhere, the default)."""

    mem_mib: MemMib | None = None
    mem_mib_path: Path_ = ()
    exclusive: bool = False
    exclusive_path: Path_ = ()


@dataclass(frozen=True)
class HostLimits:
    max_jobs_per_gpu: int | None = None  # None: only memory limits it
    max_cpu_jobs: int | None = None  # None: half the host's cores, decided at run time


def mem_mib_value(value: Any) -> MemMib | None:
    """`value` as a `mem_mib` (whole MiB from 1, or "auto"), or None when it is not one: the
    one check of the key, for the manifest, a job added or cloned at run time and the state
    file alike."""
    if value == "auto" and isinstance(value, str):
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def parse_mem_mib(ctx: Context, value: Any, path: Path_) -> MemMib:
    checked = mem_mib_value(value)
    if checked is None:
        ctx.fail(f"{MEM_MIB_HINT}, got {schema._type_name(value)}", path)
    return checked


def parse_sharing(ctx: Context, raw: dict[str, Any], path: Path_,
                  inherited: Sharing) -> Sharing:
    """The scope's or job's own `mem_mib` and `exclusive` over the inherited ones (null: not
    given)."""
    result = inherited
    if raw.get("mem_mib") is not None:
        where: Path_ = (*path, "mem_mib")
        result = replace(result, mem_mib=parse_mem_mib(ctx, raw["mem_mib"], where),
                         mem_mib_path=where)
    if raw.get("exclusive") is not None:
        where = (*path, "exclusive")
        result = replace(result, exclusive=ctx.boolean(raw["exclusive"], where),
                         exclusive_path=where)
    return result


def for_gpus(ctx: Context, sharing: Sharing, gpus: int, gpus_path: Path_) -> Sharing:
    """What a job with `gpus` GPUs (its count written at `gpus_path`) keeps of `sharing`.

    The paths of one job's scopes extend each other (top, phase, template or job), so the
    longer path is the one nearer the job."""
    if gpus > 0:
        return sharing
    taken = f"{schema.render_path(gpus_path)} is 0, line {ctx.line(gpus_path)}"
    if sharing.mem_mib is not None and len(sharing.mem_mib_path) >= len(gpus_path):
        ctx.fail(f"GPU memory for a job that takes no GPU ({taken}); drop mem_mib or give "
                 "the job a GPU", sharing.mem_mib_path)
    if sharing.exclusive and len(sharing.exclusive_path) >= len(gpus_path):
        ctx.fail(f"exclusive GPUs for a job that takes no GPU ({taken}); drop exclusive or "
                 "give the job a GPU", sharing.exclusive_path)
    return Sharing()


def parse_host_limits(ctx: Context, raw: dict[str, Any], path: Path_,
                      inherited: HostLimits) -> HostLimits:
    """A host's (or, at the top level, every host's default) `max_jobs_per_gpu` and
    `max_cpu_jobs`; null: not given."""
    result = inherited
    if raw.get("max_jobs_per_gpu") is not None:
        result = replace(result, max_jobs_per_gpu=ctx.integer(
            raw["max_jobs_per_gpu"], (*path, "max_jobs_per_gpu"), minimum=1))
    if raw.get("max_cpu_jobs") is not None:
        result = replace(result, max_cpu_jobs=ctx.integer(
            raw["max_cpu_jobs"], (*path, "max_cpu_jobs"), minimum=0))
    return result


def parse_margin(ctx: Context, top: dict[str, Any]) -> int:
    return ctx.integer(top.get("gpu_margin_mib", DEFAULT_MARGIN_MIB), ("gpu_margin_mib",),
                       minimum=0)
