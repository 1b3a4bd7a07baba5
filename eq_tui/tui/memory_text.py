"""What a job's memory looks like in words: an attempt's estimate and peak, and what the next
attempt asks for after a CUDA OOM on a shared GPU (the retry pane, the details screen)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eq_tui.present.memory_ask import ALONE, gib, next_ask


def escalation_text(job: Mapping[str, Any]) -> str:
    """The retry pane's: `oom (shared) → 15.0 GiB`, `oom (shared) → GPU alone`."""
    ask = next_ask(job)
    return f"oom (shared) → {ask}" if ask else ""


def escalation_detail(job: Mapping[str, Any]) -> str:
    """The details screen's: what the next attempt gets, and why."""
    ask = next_ask(job)
    if not ask:
        return ""
    if ask == ALONE:
        return "next attempt gets its GPU alone (CUDA OOMs on a shared GPU)"
    return f"next attempt asks {ask} (after a CUDA OOM on a shared GPU)"


def attempt_memory(attempt: Mapping[str, Any]) -> str:
    """`estimate 18.0 GiB · peak 17.2 GiB`, `GPU alone · peak 30.1 GiB`; "" when nothing was
    placed by memory or measured (a CPU-only attempt, a run that does not share GPUs)."""
    estimate, peak = attempt.get("estimate_mib"), attempt.get("peak_mib")
    if estimate is None and peak is None:
        return ""
    head = f"estimate {gib(estimate)}" if estimate is not None else "GPU alone"
    return head if peak is None else f"{head} · peak {gib(peak)}"
