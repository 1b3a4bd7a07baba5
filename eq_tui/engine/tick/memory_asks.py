"""What a job asks for its next attempt after CUDA OOMs on a shared GPU, by the rule the
scheduler places it by (MemoryBook.need: 1.5x its estimate, the estimate learned from its own
or its family's peak for `mem_mib: auto`, then its GPUs alone), published in the job's record.
The retry pane, the details screen and `status --jobs` show this figure and compute none, so
what they say is what the scheduler asks."""

from __future__ import annotations

from eq_tui.api.model import JobState
from eq_tui.engine.context import RunContext
from eq_tui.engine.tick.memory import MemoryBook


class MemoryAsks:
    def __init__(self, ctx: RunContext, memory: MemoryBook) -> None:
        self.ctx = ctx
        self.memory = memory
        self._key: tuple[int, int, int] | None = None
        self._escalated: list[JobState] = []

    def refresh(self) -> None:
        """Each job that had a CUDA OOM on a shared GPU and waits for its next attempt gets the
        ask the scheduler would make now (a family's peak may have grown since its OOM)."""
        ledger = self.ctx.ledger
        key = ledger.change_key()
        if key != self._key:  # which jobs escalated changes only with a job's change
            self._escalated = [job for job in ledger.jobs.values() if job.mem_escalation]
            self._key = key
        waiting = [job for job in self._escalated  # an active one's attempt asked already
                   if not job.status.is_active and not job.status.is_finished]
        plan = self.memory.plan() if waiting else None
        if plan is None:  # nothing placed by memory: no OOM on a shared GPU to follow
            return
        for job in waiting:
            spec = ledger.specs.get(job.id)
            if spec is not None and ledger.update(job, next_ask_level=job.mem_escalation,
                                                  next_ask_mib=plan.need(job, spec).mib):
                ledger.changed(job)
