"""The keys of preemption and of a lost job's requeues (top level, phase, template or job; the
nearest wins):

    preempt: true          # fits on no GPU: may stop a lower-priority job with a checkpoint
    preempt: force         # ... or any lower-priority job, contract or not
    max_preemptions: 3     # this job is preempted at most 3 times, then left to finish
    retry_lost: 1          # its session vanished with its host: requeued up to once
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from eq_tui.manifest.schema import Context
from eq_tui.manifest.yaml_lines import Path_

Preempt = bool | Literal["force"]


@dataclass(frozen=True)
class PreemptKeys:
    preempt: Preempt = False
    max_preemptions: int = 3
    retry_lost: int = 1

    def fields(self) -> dict[str, Any]:
        """As JobSpec's keyword arguments."""
        return {"preempt": self.preempt, "max_preemptions": self.max_preemptions,
                "retry_lost": self.retry_lost}


def parse_preempt_keys(ctx: Context, raw: dict[str, Any], path: Path_,
                       inherited: PreemptKeys) -> PreemptKeys:
    keys = inherited
    value = raw.get("preempt")
    if value is not None:
        if value is not True and value is not False and value != "force":
            ctx.fail(f"must be true, false or force, not {value!r}", (*path, "preempt"))
        keys = replace(keys, preempt=value)
    if raw.get("max_preemptions") is not None:
        keys = replace(keys, max_preemptions=ctx.integer(
            raw["max_preemptions"], (*path, "max_preemptions"), minimum=0))
    if raw.get("retry_lost") is not None:
        keys = replace(keys, retry_lost=ctx.integer(raw["retry_lost"], (*path, "retry_lost"),
                                                    minimum=0))
    return keys
