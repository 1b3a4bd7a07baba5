"""The jobs and every change to them. Only the ledger writes a job's or an attempt's fields
(tests/unit/test_layers.py reads every module for it): its status and attempts through its
named changes, the rest through `update` and `update_attempt`; every change is published
(JobUpdated, JobStateChanged) and marked for writing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

from eq_tui.api.events import JobRetired, JobStateChanged, JobUpdated
from eq_tui.api.model import Attempt, Failure, JobState, JobStatus, attempt_limit
from eq_tui.engine.state.bus import Bus
from eq_tui.engine.state.job_specs import spec_from_json
from eq_tui.errors import RunDirError
from eq_tui.hosts.base import AttemptRef, PathCheck
from eq_tui.manifest.model import JobSpec, Manifest

ReleaseHook = Callable[[str, list[int], float], None]
OutputPattern = Callable[[JobSpec], str | None]

# what only the ledger's named changes write: the status (set_status), the attempts
# (begin_attempt, uncount_attempt, drop_attempt, reset_attempts), the limit it keeps, the
# command (change_cmd, which forgets what the old one taught); and an attempt's number and end
# (end_attempt: never before its start)
_JOB_FIELDS = frozenset(f.name for f in fields(JobState)) - {
    "id", "status", "attempts", "attempt_limit", "history", "cmd"}
_ATTEMPT_FIELDS = frozenset(f.name for f in fields(Attempt)) - {"n", "end"}


def _set(target: JobState | Attempt, allowed: frozenset[str], values: dict[str, Any]) -> bool:
    refused = sorted(set(values) - allowed)
    if refused:
        raise AttributeError(f"{type(target).__name__}: {', '.join(refused)} not set this "
                             "way (see the ledger's named changes)")
    differ = False
    for name, value in values.items():
        differ = differ or getattr(target, name) != value
        setattr(target, name, value)
    return differ


class Ledger:
    def __init__(self, manifest: Manifest, bus: Bus, clock: Callable[[], float], *,
                 on_release: ReleaseHook, output_pattern: OutputPattern) -> None:
        # the manifest's settings a running engine never changes: the run's manifest is
        # RunContext's alone (reconcile is handed it)
        self.project = manifest.project
        self.max_attempts = manifest.oom_retry.max_attempts
        self.bus = bus
        self.clock = clock
        self.jobs: dict[str, JobState] = {}
        # every job's definition: the manifest's, and those of jobs made at run time
        self.specs: dict[str, JobSpec] = dict(manifest.job_specs)
        self.retired: list[dict[str, Any]] = []  # jobs removed from the manifest, for history
        self.unsaved = False
        self.changed_ids: dict[str, None] = {}  # jobs changed since the last write, in order
        self._on_release = on_release
        self._output_pattern = output_pattern
        self._version = 0  # counts job changes; what is built from the jobs keys on it
        self.specs_version = 0  # counts changes of `specs` (set_spec, add_job, reconcile)
        self._attempts_cache: tuple[tuple[int, int, int], dict[str, list[AttemptRef]]] | None \
            = None
        self._output_checks_cache: tuple[tuple[int, int, int], list[PathCheck]] | None = None

    # ---- changes ---------------------------------------------------------------------------

    def changed(self, job: JobState) -> None:
        """Every change to a job ends here: it is what gets the job written to disk."""
        self.unsaved = True
        job.attempt_limit = attempt_limit(job, self.max_attempts)
        self.changed_ids[job.id] = None
        self._version += 1
        self.bus.publish(JobUpdated(project=self.project, at=self.clock(), job=job.id,
                                    state=job.to_json()))

    def set_status(self, job: JobState, new: JobStatus, *, failure_class: str | None = None,
                   detail: str = "") -> None:
        old = job.status
        now = self.clock()
        if old.is_active and not new.is_active and job.host is not None:
            self._on_release(job.host, job.gpus, now)
        job.status = new
        if new == JobStatus.COMPLETED:
            job.failure = None
            job.reason = None
        if failure_class is not None:
            job.failure = Failure(failure_class, detail)
        current = job.current
        self.bus.publish(JobStateChanged(
            project=self.project, at=now, job=job.id, old=str(old), new=str(new),
            host=job.host, gpus=tuple(job.gpus), attempt=current.n if current else 0,
            failure_class=failure_class, detail=detail))
        self.changed(job)

    @staticmethod
    def update(job: JobState, **values: Any) -> bool:
        """Sets these fields of a job (AttributeError for its status, attempts or command:
        their named changes); True when one of them changed. It marks nothing for writing:
        the caller's `set_status` or `changed` does, when the change is worth a write."""
        return _set(job, _JOB_FIELDS, values)

    @staticmethod
    def update_attempt(attempt: Attempt, **values: Any) -> bool:
        """Sets these fields of an attempt (its end: `end_attempt`), as `update` does."""
        return _set(attempt, _ATTEMPT_FIELDS, values)

    @staticmethod
    def end_attempt(attempt: Attempt, end: float, *, host_clock: bool) -> None:
        """Its end: by the host's clock (its records), or marked as the engine's where the
        host could not say."""
        attempt.close(end)
        attempt.end_by_engine = not host_clock

    @staticmethod
    def change_cmd(job: JobState, new: str) -> None:
        job.change_cmd(new)

    @staticmethod
    def reset_attempts(job: JobState, *, status: JobStatus | None = None) -> None:
        """A fresh count of attempts (an edited finished job, a retired job back in the
        manifest); the attempts it made stay in its history. `status` only for a record not
        yet in the ledger (a live job's status changes through set_status, which publishes)."""
        job.attempts = 0
        job.retries_by_class = {}
        job.retry_at = None
        job.reason = None
        job.failure = None
        if status is not None:
            job.status = status

    @staticmethod
    def uncount_attempt(job: JobState) -> None:
        """An attempt whose session never started does not count against the job's budget."""
        job.attempts = max(0, job.attempts - 1)

    @staticmethod
    def drop_attempt(job: JobState) -> None:
        """The current attempt, refused by its host before anything started, is forgotten."""
        job.history.pop()
        job.attempts = max(0, job.attempts - 1)

    def begin_attempt(self, job: JobState, *, n: int, host: str, gpus: list[int], session: str,
                      attempt_dir: str, decided_at: float, replayed: bool = False,
                      estimate_mib: int | None = None) -> Attempt:
        """A new attempt, recorded as `launching` (the caller writes it to disk before any
        session starts). `replayed`: restored from the journal, which already holds its
        `launching` line, so none is written again. `estimate_mib`: placed by memory, sharing
        its GPUs and holding this much on each."""
        attempt = Attempt(n=n, host=host, gpus=list(gpus), session=session,
                          attempt_dir=attempt_dir, log=f"{attempt_dir}/log",
                          decided_at=decided_at, estimate_mib=estimate_mib,
                          shared=estimate_mib is not None)
        job.history.append(attempt)
        job.attempts += 1
        job.retry_at = None
        job.reason = None
        job.last_line = ""
        job.exited_seen_at = None
        if replayed:
            job.status = JobStatus.LAUNCHING
            self.changed(job)
        else:
            self.set_status(job, JobStatus.LAUNCHING)
        return attempt

    def add_job(self, job: JobState, spec: JobSpec) -> None:
        """A job made while the queue runs (added, cloned, reloaded), after the others."""
        self.jobs[job.id] = job
        self.set_spec(job.id, spec)
        self.changed(job)

    def set_spec(self, job_id: str, spec: JobSpec) -> None:
        """A job's definition changed (edited, reloaded) or was made."""
        self.specs[job_id] = spec
        self.specs_version += 1

    def retire_job(self, job_id: str, by: str) -> JobState:
        """A waiting job a reload removed: kept in `retired` for its history."""
        job = self.jobs.pop(job_id)
        self.bus.publish(JobRetired(project=self.project, at=self.clock(), job=job_id, by=by))
        self.specs.pop(job_id, None)
        self.retired.append(job.to_json())
        self.changed_ids.pop(job_id, None)
        self.unsaved = True
        self._version += 1
        return job

    def take_retired(self, spec: JobSpec) -> JobState | None:
        """A job retired earlier and back in the file (a reload), out of `retired`: its history
        continues (its attempts keep their numbers and directories) with a fresh count of
        attempts and the file's definition. Not in the ledger yet: `add_job` puts it there."""
        for i in range(len(self.retired) - 1, -1, -1):
            if self.retired[i].get("id") == spec.id:
                job = JobState.from_json(self.retired.pop(i))
                self.reset_attempts(job, status=JobStatus.PENDING)
                job.change_cmd(spec.cmd)
                job.phase = spec.phase
                if not job.priority_set:
                    job.priority = spec.priority
                return job
        return None

    # ---- loading ---------------------------------------------------------------------------

    def restore(self, saved: dict[str, Any], source: str) -> None:
        self.retired = list(saved.get("retired") or [])
        for raw in saved.get("jobs", []):
            try:
                job = JobState.from_json(raw)
            except (KeyError, TypeError, ValueError) as exc:
                raise RunDirError(f"{source}: a job record is unreadable ({exc!r}); fix or "
                                  "move the file") from None
            job.attempt_limit = attempt_limit(job, self.max_attempts)
            self.jobs[job.id] = job

    def reconcile(self, manifest: Manifest) -> list[JobState]:
        """New jobs are added, changed commands of unfinished jobs take effect next attempt,
        jobs gone from the manifest are retired unless still running. A job that needed a
        person and whose command changed is retried (returned: the fix is the person's word)."""
        ordered: dict[str, JobState] = {}
        self.specs = dict(manifest.job_specs)
        self.specs_version += 1
        reopened: list[JobState] = []
        for spec in manifest.jobs:
            job = self.jobs.pop(spec.id, None)
            if job is None:
                job = JobState(id=spec.id, phase=spec.phase, cmd=spec.cmd,
                               params=dict(spec.params), priority=spec.priority)
            else:
                job.params = dict(spec.params)
                if not job.priority_set:
                    job.priority = spec.priority
                job.phase = spec.phase
                if job.edits and job.cmd != spec.cmd:
                    self.specs[spec.id] = replace(spec, cmd=job.cmd)  # a person's edit stays
                elif job.cmd != spec.cmd and job.status != JobStatus.COMPLETED:
                    was = job.cmd
                    job.change_cmd(spec.cmd)
                    if job.status.needs_person:
                        self.reopen(job, f"{spec.id}: command changed since it was "
                                    f"{job.status}; retrying with `{spec.cmd}` (was `{was}`)")
                        reopened.append(job)
                    else:
                        self.bus.alert("info", f"{spec.id}: command changed; the next attempt "
                                       f"uses `{spec.cmd}` (was `{was}`)", job=spec.id)
            ordered[spec.id] = job
        for job in self.jobs.values():
            if job.origin != "manifest" and job.spec is not None:
                self.specs[job.id] = spec_from_json(job.spec)  # made at run time: kept
                ordered[job.id] = job
            elif job.status.is_active:
                self.bus.alert("warning", f"{job.id} is no longer in the manifest; it keeps "
                               "running and is watched until it ends", job=job.id)
                ordered[job.id] = job
            else:
                self.retired.append(job.to_json())
        self.jobs = ordered
        self._version += 1
        return reopened

    def reopen(self, job: JobState, why: str) -> None:
        """Pending again with a fresh retry budget (its launches keep counting)."""
        job.retry_base = job.attempts
        job.retries_by_class = {}
        job.retry_at = None
        job.reason = None
        job.failure = None
        self.set_status(job, JobStatus.PENDING, detail=why)
        self.bus.alert("info", why, job=job.id)

    # ---- reads -----------------------------------------------------------------------------

    def all_finished(self) -> bool:
        return all(job.status.is_finished for job in self.jobs.values())

    def _key(self) -> tuple[int, int, int]:
        return (self._version, id(self.jobs), len(self.jobs))

    def change_key(self) -> tuple[int, int, int]:
        """Changes whenever a job does (a status, an attempt, a job added): for caches of
        what the jobs say."""
        return self._key()

    def attempts_by_host(self) -> dict[str, list[AttemptRef]]:
        """The attempts each host's probe asks about: one pass over the jobs per change of
        them (not one per host per tick)."""
        key = self._key()
        if self._attempts_cache is None or self._attempts_cache[0] != key:
            by_host: dict[str, list[AttemptRef]] = {}
            for job in self.jobs.values():
                current = job.current
                if not job.status.is_active or job.host is None or current is None:
                    continue
                spec = self.specs.get(job.id)
                by_host.setdefault(job.host, []).append(AttemptRef(
                    key=job.id, session=current.session, attempt_dir=current.attempt_dir,
                    output_check=self._output_pattern(spec) if spec else None))
            self._attempts_cache = (key, by_host)
        return self._attempts_cache[1]

    def pending_output_checks(self) -> list[PathCheck]:
        key = self._key()
        if self._output_checks_cache is None or self._output_checks_cache[0] != key:
            checks = []
            for job in self.jobs.values():
                if not job.status.is_waiting:
                    continue
                spec = self.specs.get(job.id)
                pattern = self._output_pattern(spec) if spec else None
                if pattern:
                    checks.append(PathCheck(job.id, pattern))
            self._output_checks_cache = (key, checks)
        return self._output_checks_cache[1]

    def held_gpus(self) -> dict[tuple[str, int], str]:
        """(host, gpu) -> job id for every GPU a job of ours holds (from the attempt index)."""
        return {(host, gpu): ref.key for host, refs in self.attempts_by_host().items()
                for ref in refs if ref.key in self.jobs for gpu in self.jobs[ref.key].gpus}

    def any_job_due(self, now: float) -> bool:
        for job in self.jobs.values():
            if job.status == JobStatus.PENDING and (job.retry_at is None or job.retry_at <= now):
                return True
            if job.status == JobStatus.FAILED_OOM and job.retry_at is not None \
                    and job.retry_at <= now:
                return True
        return False

    def next_retry(self, now: float) -> float | None:
        """When the earliest OOM retry still ahead comes due."""
        retries = [job.retry_at for job in self.jobs.values()
                   if job.status == JobStatus.FAILED_OOM and job.retry_at is not None
                   and job.retry_at > now]
        return min(retries) if retries else None
