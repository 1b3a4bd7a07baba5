"""A GPU that several of our jobs share (placed by memory), drawn as one memory bar in segments:
each job's memory — solid what its processes use, hatched what it holds beyond that (its estimate
until it has allocated) — then someone else's memory and the free rest; each job's segment
carries its id where the id fits. Pure, and cached per GPU reading: a probe that changes
nothing on a GPU draws nothing again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from textual.content import Content

JOB_STYLES = ("$primary", "$secondary")  # alternated, so that neighbouring jobs stand apart
OTHER_STYLE = "$warning"
HELD_CHAR = "▒"
LABEL_MIN = 4  # a narrower label says too little: none
Share = tuple[str, int, int]  # job id, MiB its processes use, MiB it holds (at least that)


def shared_jobs(gpu: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    """Our jobs on the GPU when there are several (else empty: one job keeps the plain bar)."""
    jobs = gpu.get("jobs") or ()
    return jobs if len(jobs) > 1 else ()


def has_shared(host: Mapping[str, Any]) -> bool:
    return any(shared_jobs(gpu) for gpu in host.get("gpus") or ())


def shares(jobs: Sequence[Mapping[str, Any]]) -> tuple[Share, ...]:
    out = []
    for job in jobs:
        used = int(job.get("used") or 0)
        held = job.get("mib")
        out.append((str(job.get("id", "?")), used, max(used, int(held or 0))))
    return tuple(out)


def others_mib(gpu: Mapping[str, Any], ours: tuple[Share, ...]) -> int:
    """What the GPU reads beyond what our jobs' processes use: someone else's."""
    return max(0, int(gpu.get("memory_used_mib") or 0) - sum(used for _, used, _ in ours))


def label(job_id: str, width: int) -> str:
    """The id, or its end where it does not fit: a sweep's ids differ at the end
    (`sweep_lr0.1_s2` in 7 cells: `…0.1_s2`)."""
    if width < LABEL_MIN:
        return ""
    return job_id if len(job_id) <= width else "…" + job_id[len(job_id) - width + 1:]


def spans(amounts: Sequence[int], jobs: int, scale: int, width: int) -> list[tuple[int, int]]:
    """Cells [start, end) of each amount (the jobs' first), rounded cumulatively so that they
    add up; every job gets at least one cell while there are cells."""
    edges, start, seen = [], 0, 0
    for i, amount in enumerate(amounts):
        seen += amount
        end = round(seen / scale * width) if scale else start
        if i < jobs:
            end = max(end, start + 1)
            end = min(end, width - (jobs - 1 - i))
        end = max(start, min(end, width))
        edges.append((start, end))
        start = end
    return edges


def _add(parts: list[tuple[str, str]], text: str, style: str) -> None:
    """One span per run of a style, not one per cell."""
    if not text:
        return
    if parts and parts[-1][1] == style:
        parts[-1] = (parts[-1][0] + text, style)
    else:
        parts.append((text, style))


@lru_cache(maxsize=4096)
def segment_bar(ours: tuple[Share, ...], other: int, total: int, width: int) -> Content:
    """The bar itself, `width` cells: each job's segment, someone else's memory, free."""
    scale = max(total, sum(held for *_, held in ours) + other)
    edges = spans([held for *_, held in ours] + [other], len(ours), scale, width)
    parts: list[tuple[str, str]] = []
    for n, ((job_id, used, held), (start, end)) in enumerate(zip(ours, edges, strict=False)):
        cells = end - start
        solid = cells if not held else round(used / held * cells)
        text = label(job_id, cells - 1)  # a cell of its own colour after it, before the next
        style = JOB_STYLES[n % len(JOB_STYLES)]
        for i in range(cells):
            named = i < len(text)
            if i < solid:  # used: the job's colour as the background
                _add(parts, text[i] if named else " ", f"bold reverse {style}" if named
                     else f"reverse {style}")
            else:  # held, not allocated yet: hatched
                _add(parts, text[i] if named else HELD_CHAR, f"bold {style}" if named
                     else style)
    start, end = edges[-1]
    _add(parts, "█" * (end - start), OTHER_STYLE)
    _add(parts, "░" * (width - end), "dim")
    return Content.assemble(*parts)


def shared_bar(gpu: Mapping[str, Any], width: int) -> Content:
    """The segmented bar of a GPU that `shared_jobs` says is shared."""
    ours = shares(shared_jobs(gpu))
    total = int(gpu.get("memory_total_mib") or 0)
    if not total:
        return Content.styled("?" * width, "dim")
    return segment_bar(ours, others_mib(gpu, ours), total, width)
