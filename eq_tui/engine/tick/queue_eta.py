"""The queue's ETA, kept by the engine from every change of every job (present/queue_eta.py
EtaBook) and published when it moves away from counting down: in a `queue_eta` event and the
snapshot, so the header and `status` show the engine's figure and compute none."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from eq_tui.api.events import Event, JobRetired, JobUpdated, QueueEta
from eq_tui.api.model import JobState
from eq_tui.engine.context import RunContext
from eq_tui.engine.tick.search_trials import SearchTrials
from eq_tui.present.pace import DEFAULT_GROUP_OVER
from eq_tui.present.queue_eta import EtaBook, counted_down

# an estimate within this of the published one counted down is not news: a steady sweep's
# ETA is one event now and then, not one a tick
SAME_S = 2.0
SAME_FRACTION = 0.02


class QueueEtaKeeper:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.book = EtaBook()
        self.eta_s: float | None = None
        self.eta_at: float | None = None
        # jobs per phase the queue will run that are not made yet (a search's trials to ask)
        self.more: Callable[[], dict[str, int]] = dict
        ctx.bus.listen(self._heard)

    def seed(self, jobs: Iterable[JobState]) -> None:
        """The jobs as they are when the engine starts (restored or new)."""
        for job in jobs:
            self.book.update(job.id, job.to_json(), self._group_over(job.phase))

    def _heard(self, event: Event) -> None:
        if isinstance(event, JobUpdated):
            phase = str(event.state.get("phase") or "")
            self.book.update(event.job, event.state, self._group_over(phase))
        elif isinstance(event, JobRetired):
            self.book.update(event.job, None)

    def _group_over(self, phase: str) -> str:
        for spec in self.ctx.manifest.phases:
            if spec.name == phase:
                return spec.results.group_over or DEFAULT_GROUP_OVER
        return DEFAULT_GROUP_OVER

    def publish(self, finished: bool) -> None:
        """This tick's estimate, sent when it differs from the last one counted down."""
        now = self.ctx.clock()
        eta = 0.0 if finished else self.book.eta(now, self.more())
        shown = counted_down(self.eta_s, self.eta_at, now)
        if eta is None and shown is None:
            return
        if eta is not None and shown is not None \
                and abs(eta - shown) <= max(SAME_S, SAME_FRACTION * shown):
            return
        self.eta_s, self.eta_at = eta, now
        self.ctx.bus.publish(QueueEta(project=self.ctx.manifest.project, at=now, eta_s=eta))


def trials_to_come(search: SearchTrials) -> dict[str, int]:
    """Jobs per phase the searches will still add: the trials not asked yet, each its grid
    points (a search bounded by its budget alone: none known)."""
    more = {}
    for phase, spec in search.searches:
        study = search.studies.get(phase.name)
        if study is not None and spec.trials is not None:
            points = math.prod(len(values) for _, values in spec.grid)
            more[phase.name] = max(0, spec.trials - study.asked()) * points
    return more
