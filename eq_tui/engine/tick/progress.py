"""Each running job's whole-job progress, kept from what its probes see: each probe's epoch
line (Keras's `Epoch 5/8`, which its bar soon pushes out of view) and last line, fed in the
log's order to the job's tracker (api/job_progress.py), dated by the probe that saw them. The
tracker's state is the job's `progress` (so it survives a restart of the engine) and starts
over with each attempt."""

from __future__ import annotations

from eq_tui.api.job_progress import JobProgress
from eq_tui.api.model import JobState
from eq_tui.engine.state.ledger import Ledger
from eq_tui.hosts.base import AttemptProbe


class ProgressKeeper:
    def __init__(self) -> None:
        # job id -> the attempt its tracker belongs to, the tracker (rebuilt from the job's
        # `progress` after a restart)
        self._trackers: dict[str, tuple[int, JobProgress]] = {}

    def saw(self, job: JobState, probe: AttemptProbe, taken_at: float) -> bool:
        """Feed what a probe saw of a running job; True when the job's progress changed."""
        stale = job.progress is not None and job.progress_attempt != job.attempts
        if stale:  # a new attempt: the last one's progress is not this one's
            Ledger.update(job, progress=None, progress_attempt=job.attempts)
        lines = [line for line in (probe.epoch_line, probe.last_line) if line]
        if not lines:
            return stale
        tracker = self._tracker(job)
        for line in lines:
            tracker.observe(line, taken_at)
        data = tracker.to_json()
        if data == job.progress:
            return stale
        Ledger.update(job, progress=data, progress_attempt=job.attempts)
        return True

    def _tracker(self, job: JobState) -> JobProgress:
        known = self._trackers.get(job.id)
        if known is not None and known[0] == job.attempts:
            return known[1]
        if job.progress is not None and job.progress_attempt == job.attempts:
            tracker = JobProgress.from_json(job.progress)
        else:
            tracker = JobProgress()
            tracker.cmd_totals(job.cmd)
        self._trackers[job.id] = (job.attempts, tracker)
        return tracker
