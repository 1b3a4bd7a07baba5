"""The memory a job's next attempt asks after CUDA OOMs on a shared GPU, in words, from what the
engine published in its record (engine/tick/memory_asks.py): the UI's retry pane and details
screen and `status --jobs` say the same, and none of them computes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ALONE = "GPU alone"


def gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def next_ask(job: Mapping[str, Any]) -> str:
    """`15.0 GiB`, or `GPU alone`; "" before any CUDA OOM on a shared GPU, or while the engine
    has not yet said what the latest one asks."""
    level = int(job.get("mem_escalation") or 0)
    if level <= 0 or int(job.get("next_ask_level") or 0) != level:
        return ""
    mib = job.get("next_ask_mib")
    return gib(int(mib)) if mib is not None else ALONE
