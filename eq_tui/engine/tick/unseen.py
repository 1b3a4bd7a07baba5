"""Say what is never seen: once a tick (after early stopping has read the running jobs' new
reports), the goal and early_stop metrics never read from jobs that ran long enough to print
them (results/unseen.py says which count) raise an alert naming the metric, the jobs and what
was read instead. One alert per (phase, metric) when it is first found, another only when its
jobs have doubled since the last: a sweep of a hundred jobs says it a handful of times, not
every tick. summary.md ends with the same finding (`summary_tail`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.context import RunContext
from eq_tui.manifest.model import Manifest
from eq_tui.results.records import Record
from eq_tui.results.unseen import (
    Sighting,
    Unseen,
    Watched,
    markdown,
    unseen,
    unseen_in_records,
    watched_of,
)

GROWTH = 2  # the jobs of a finding must double before it is said again
COUNTED = frozenset({JobStatus.RUNNING, JobStatus.COMPLETED})  # the rule ignores the others


class UnseenWatch:
    def __init__(self, ctx: RunContext, names_seen: dict[str, tuple[int, dict[str, int]]],
                 collected: dict[str, Record], records: Callable[[], list[Record]],
                 results_table: Callable[[], Awaitable[str]]) -> None:
        """`names_seen`: EarlyStop's reports per metric of each followed job's attempt;
        `collected`: Harvest's last collected record per job; `records` and `results_table`:
        Harvest's results.jsonl records and summary.md's results table."""
        self.ctx = ctx
        self.names_seen = names_seen
        self.collected = collected
        self.records = records
        self.results_table = results_table
        self.said: dict[tuple[str, str], int] = {}  # (phase, metric) -> jobs when last said
        self._watched: tuple[Manifest, list[Watched]] | None = None

    def watched(self) -> list[Watched]:
        """The manifest's watched metrics (again only when a reload changed the manifest)."""
        manifest = self.ctx.manifest
        if self._watched is None or self._watched[0] is not manifest:
            self._watched = (manifest, watched_of(manifest))
        return self._watched[1]

    def check(self) -> list[Unseen]:
        """Alert what is newly never seen; the findings as they stand."""
        watched = self.watched()
        if not watched:
            return []
        phases = {watch.phase for watch in watched}
        findings = unseen(watched, [self._sighting(job) for job in self.ctx.ledger.jobs.values()
                                    if job.phase in phases and job.status in COUNTED])
        self._say(findings)
        return findings

    def _say(self, findings: list[Unseen]) -> None:
        for finding in findings:
            before = self.said.get(finding.key, 0)
            if len(finding.jobs) >= max(1, before * GROWTH):
                self.said[finding.key] = len(finding.jobs)
                self.ctx.bus.alert("warning", finding.text())

    def _sighting(self, job: JobState) -> Sighting:
        record = self.collected.get(job.id)
        current = job.current.n if job.current is not None else 0
        final = record["metrics"] if record is not None and record.get("attempt") == current \
            else None
        seen = self.names_seen.get(job.id)
        reported = seen[1] if seen is not None and seen[0] == job.attempts \
            and job.status == JobStatus.RUNNING else None
        progress = job.progress.get("fraction") if job.progress is not None \
            and job.progress_attempt == job.attempts else None
        return Sighting(id=job.id, phase=job.phase, status=str(job.status), final=final,
                        reported=reported,
                        progress=float(progress) if isinstance(progress, (int, float)) else None)

    async def summary_tail(self) -> str:
        """What summary.md ends with: the results table (once what is being read is in), then
        the metrics never read from the completed jobs — said as an alert too if it is new (the
        last jobs' metrics are read after the last tick)."""
        table = await self.results_table()
        watched = self.watched()
        findings = unseen_in_records(watched, self.records()) if watched else []
        self._say(findings)
        section = markdown(findings)
        return "\n".join(part for part in (table, section) if part)
