"""What a job's memory looks like in words: an attempt's estimate and peak, and what the next
attempt asks for after a CUDA OOM on a shared GPU (the retry pane, the details screen)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# engine/tick/memory.py's ESCALATION (a test keeps the two equal): importing it would pull the
# scheduler into every attached UI
ESCALATION = 1.5


def gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def last_estimate(job: Mapping[str, Any]) -> int | None:
    """What its latest attempt placed by memory was placed for, per GPU."""
    for attempt in reversed(job.get("history") or []):
        if attempt.get("estimate_mib") is not None:
            return int(attempt["estimate_mib"])
    return None


def next_ask(job: Mapping[str, Any]) -> str:
    """After CUDA OOMs on a shared GPU: `15.0 GiB` (1.5x its estimate) or `GPU alone`; ""
    before any."""
    level = int(job.get("mem_escalation") or 0)
    if level <= 0:
        return ""
    if level >= 2:
        return "GPU alone"
    estimate = last_estimate(job)
    return gib(math.ceil(estimate * ESCALATION)) if estimate else f"{ESCALATION:g}x its estimate"


def escalation_text(job: Mapping[str, Any]) -> str:
    """The retry pane's: `oom (shared) → 15.0 GiB`, `oom (shared) → GPU alone`."""
    ask = next_ask(job)
    return f"oom (shared) → {ask}" if ask else ""


def escalation_detail(job: Mapping[str, Any]) -> str:
    """The details screen's: what the next attempt gets, and why."""
    ask = next_ask(job)
    if not ask:
        return ""
    if ask == "GPU alone":
        return "next attempt gets its GPU alone (CUDA OOMs on a shared GPU)"
    return f"next attempt asks {ask} ({ESCALATION:g}x its estimate, after a CUDA OOM on a " \
           "shared GPU)"


def attempt_memory(attempt: Mapping[str, Any]) -> str:
    """`estimate 18.0 GiB · peak 17.2 GiB`, `GPU alone · peak 30.1 GiB`; "" when nothing was
    placed by memory or measured (a CPU-only attempt, a run that does not share GPUs)."""
    estimate, peak = attempt.get("estimate_mib"), attempt.get("peak_mib")
    if estimate is None and peak is None:
        return ""
    head = f"estimate {gib(estimate)}" if estimate is not None else "GPU alone"
    return head if peak is None else f"{head} · peak {gib(peak)}"
