"""A host on one line, for the compact grid: name, link state, round trip, one cell per GPU
(coloured by state — a GPU several of our jobs share in its own colour —, its height the memory
used), how many of our jobs run there, and the totals of its GPUs: busy / free / other /
quarantined."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from textual.content import Content

from eq_tui.api.holders import theirs

CELL_LEVELS = "▁▂▃▄▅▆▇█"
STATE_STYLE = {"busy": "$primary", "free": "$success", "other": "$warning",
               "quarantined": "bold $error"}
DRAINED_STYLE = "bold $warning"
SHARED_STYLE = "$accent"  # a busy GPU that several of our jobs share
NAME_WIDTH_MAX = 28


def gpu_state(gpu: Mapping[str, Any]) -> str:
    """busy (one of our jobs), free, other (another process or eq-tui user's job, a job's
    memory still draining, a GPU the manifest leaves out or a person drained) or
    quarantined."""
    if gpu.get("quarantined"):
        return "quarantined"
    if gpu.get("job"):
        return "busy"
    if gpu.get("drained") or gpu.get("settling") or gpu.get("other") \
            or not gpu.get("allowed", True) or theirs(gpu):
        return "other"
    return "free"


@dataclass(frozen=True)
class GpuTotals:
    busy: int = 0
    free: int = 0
    other: int = 0
    quarantined: int = 0

    def content(self) -> Content:
        return _totals_content(self)

    def __str__(self) -> str:
        return self.content().plain


@lru_cache(maxsize=512)
def _totals_content(self: GpuTotals) -> Content:
    return Content.assemble(
            (f"{self.busy} busy", STATE_STYLE["busy"] if self.busy else "dim"), " ",
            (f"{self.free} free", STATE_STYLE["free"] if self.free else "dim"), " ",
            (f"{self.other} other", STATE_STYLE["other"] if self.other else "dim"), " ",
            (f"{self.quarantined} quar", STATE_STYLE["quarantined"] if self.quarantined
             else "dim"))


def gpu_totals(gpus: Sequence[Mapping[str, Any]]) -> GpuTotals:
    counts = {"busy": 0, "free": 0, "other": 0, "quarantined": 0}
    for gpu in gpus:
        counts[gpu_state(gpu)] += 1
    return GpuTotals(**counts)


def gpu_cell(gpu: Mapping[str, Any]) -> tuple[str, str]:
    used, total = gpu.get("memory_used_mib"), gpu.get("memory_total_mib")
    if not total or used is None:
        char = "?"
    else:
        level = round(max(0.0, min(1.0, float(used) / float(total))) * (len(CELL_LEVELS) - 1))
        char = CELL_LEVELS[level]
    state = gpu_state(gpu)
    if state == "busy" and len(gpu.get("jobs") or ()) > 1:
        return char, SHARED_STYLE
    return char, STATE_STYLE[state]


def job_ids(gpus: Sequence[Mapping[str, Any]]) -> set[str]:
    """Our jobs on these GPUs: every one on a shared GPU, not only the first."""
    ids: set[str] = set()
    for gpu in gpus:
        shared = gpu.get("jobs")
        if shared:
            ids.update(str(job.get("id")) for job in shared)
        elif gpu.get("job"):
            ids.add(str(gpu["job"]))
    return ids


def state_text(host: Mapping[str, Any]) -> tuple[str, str]:
    state = str(host.get("state", "connecting"))
    return state, {"up": "$success", "down": "bold $error"}.get(state, "$warning")


def rtt_text(host: Mapping[str, Any]) -> str:
    rtt = host.get("rtt_s")
    if isinstance(rtt, (int, float)) and host.get("state") == "up":
        return f"{rtt * 1000:.0f}ms"
    return ""


@dataclass(frozen=True)
class LineWidths:
    """Column widths shared by every line, so that the lines of a grid align."""

    name: int
    state: int
    gpus: int

    @property
    def total(self) -> int:
        # name, state, rtt (6), cells, jobs ("12 jobs"), totals ("8 busy 8 free 8 other 8 quar")
        return self.name + 1 + self.state + 1 + 6 + 2 + self.gpus + 2 + 7 + 2 + 28


def line_widths(names: Sequence[str], hosts: Sequence[Mapping[str, Any]]) -> LineWidths:
    return LineWidths(
        name=min(NAME_WIDTH_MAX, max((len(n) for n in names), default=4)),
        state=max((len(str(h.get("state", "connecting"))) for h in hosts), default=2),
        gpus=max((len(h.get("gpus") or []) for h in hosts), default=1))


def host_line(name: str, host: Mapping[str, Any], widths: LineWidths, *,
              selected: bool = False) -> Content:
    gpus = host.get("gpus") or []
    jobs = len(job_ids(gpus))
    state, style = state_text(host)
    shown = name if len(name) <= widths.name else name[: widths.name - 1] + "…"
    head = Content.assemble(
        (f"{shown:<{widths.name}}", "bold reverse" if selected else "bold"), " ",
        (f"{state:<{widths.state}}", style), " ", (f"{rtt_text(host):>6}", "dim"), "  ")
    if host.get("state") == "down":
        return Content.assemble(head, (str(host.get("reason") or "unreachable"), "$error"))
    cells: list[tuple[str, str]] = []
    for char, cell_style in map(gpu_cell, gpus):  # one span per run of a state, not per GPU
        if cells and cells[-1][1] == cell_style:
            cells[-1] = (cells[-1][0] + char, cell_style)
        else:
            cells.append((char, cell_style))
    return Content.assemble(
        head, *cells, " " * (widths.gpus - len(gpus)), "  ",
        (f"{jobs:>2} job{'s' if jobs != 1 else ' '}", "$primary" if jobs else "dim"), "  ",
        gpu_totals(gpus).content(), drained_text(host))


def drained_text(host: Mapping[str, Any]) -> Content:
    """`  drained` (or `  drained GPU 0,1`) for a host a person drained (`eq-tui drain`, `d`)."""
    drained = host.get("drained")
    if not drained:
        return Content("")
    which = "" if drained == "all" else f" GPU {','.join(map(str, drained))}"
    return Content.styled(f"  drained{which}", DRAINED_STYLE)
