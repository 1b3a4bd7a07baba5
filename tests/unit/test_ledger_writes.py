"""The ledger's field writes (state/ledger.py `update`, `update_attempt` and the named changes),
the one way any part changes a job or an attempt (tests/unit/test_layers.py holds every module
to it): what they set, what they refuse, and that a write marks nothing for the journal."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.cli.rerun_flags import changed_since_completed as client_side
from eq_tui.engine.commands.rerun import changed_since_completed
from eq_tui.engine.state.ledger import Ledger
from eq_tui.manifest.model import JobSpec, Manifest
from tests.support.context_bed import context


def attempt(n: int = 1, start: float | None = None) -> Attempt:
    return Attempt(n=n, host="h", gpus=[0], session=f"s{n}", attempt_dir=f"d{n}", log="l",
                   start=start)


def running(job_id: str = "a") -> JobState:
    return JobState(id=job_id, phase="main", cmd="x", status=JobStatus.RUNNING, attempts=1,
                    history=[attempt()])


def manifest(*cmds: tuple[str, str]) -> Manifest:
    return Manifest(project="p", source="m.yaml",
                    jobs=tuple(JobSpec(id=i, phase="main", cmd=c) for i, c in cmds))


def test_update_sets_says_whether_anything_changed_and_marks_nothing(tmp_path: Path) -> None:
    """A field written does not by itself go to disk or to the front ends: the journal writes
    per tick stay those of the changes that call `changed` or `set_status` (bench/all.py)."""
    job = running()
    ctx = context(tmp_path, manifest(("a", "x")), [job])
    events: asyncio.Queue[object] = ctx.bus.subscribe()
    assert Ledger.update(job, reason="waits", retry_at=5.0) is True
    assert (job.reason, job.retry_at) == ("waits", 5.0)
    assert Ledger.update(job, reason="waits") is False
    current = job.current
    assert current is not None
    assert Ledger.update_attempt(current, exit_code=3) is True
    assert Ledger.update_attempt(current, exit_code=3) is False
    assert current.exit_code == 3
    assert not ctx.ledger.unsaved and not ctx.ledger.changed_ids and events.empty()


@pytest.mark.parametrize("name", ["status", "attempts", "attempt_limit", "history", "id", "cmd",
                                  "no_such_field"])
def test_update_refuses_what_only_a_named_change_writes(name: str) -> None:
    job = running()
    before = job.to_json()
    with pytest.raises(AttributeError, match=name):
        Ledger.update(job, reason="set first?", **{name: None})
    assert job.to_json() == before  # nothing set: not even the allowed field beside it


@pytest.mark.parametrize("name", ["n", "end", "no_such_field"])
def test_update_attempt_refuses_its_number_and_its_end(name: str) -> None:
    current = attempt()
    with pytest.raises(AttributeError, match=name):
        Ledger.update_attempt(current, **{name: 1})
    assert (current.n, current.end) == (1, None)


def test_an_attempt_ends_never_before_it_started() -> None:
    current = attempt(start=100.5)
    Ledger.end_attempt(current, 100.0, host_clock=True)  # an exit record with whole seconds
    assert current.end == 100.5


def test_a_refused_launch_is_dropped_and_not_counted() -> None:
    job = running()
    job.history.append(attempt(2))
    job.attempts = 2
    Ledger.drop_attempt(job)
    assert [a.n for a in job.history] == [1] and job.attempts == 1


def test_a_retired_job_comes_back_with_its_history_and_the_files_definition(
        tmp_path: Path) -> None:
    old = JobState(id="a", phase="old", cmd="x", status=JobStatus.STUCK, attempts=3,
                   history=[attempt(1), attempt(2), attempt(3)], min_gpu_mib=80_000,
                   priority=2, reason="why")
    ctx = context(tmp_path, manifest(("a", "x")))
    ctx.ledger.retired.append(old.to_json())
    back = ctx.ledger.take_retired(JobSpec(id="a", phase="main", cmd="y", priority=5))
    assert back is not None and ctx.ledger.retired == []
    assert (back.status, back.attempts, back.cmd, back.phase, back.priority) == \
        (JobStatus.PENDING, 0, "y", "main", 5)
    assert (back.min_gpu_mib, back.reason, [a.n for a in back.history]) == (None, None, [1, 2, 3])
    assert ctx.ledger.take_retired(JobSpec(id="b", phase="main", cmd="y")) is None


def test_rerun_changed_picks_on_the_client_the_jobs_the_engine_names_at_start(
        tmp_path: Path) -> None:
    """`--rerun-changed` (cli/rerun_flags.py) reads the snapshot's records; the start notice
    (engine/commands/rerun.py) reads the ledger's specs after reconciling: the same jobs."""
    def completed(job_id: str, cmd: str, edited: bool = False) -> JobState:
        edits = [{"kind": "edit", "old": "x", "new": cmd}] if edited else []
        return JobState(id=job_id, phase="main", cmd=cmd, status=JobStatus.COMPLETED,
                        edits=edits)

    jobs = [completed("changed", "old"), completed("same", "new"),
            completed("edited", "mine", edited=True),
            JobState(id="stuck", phase="main", cmd="old", status=JobStatus.STUCK),
            completed("gone", "old")]
    new = manifest(("changed", "new"), ("same", "new"), ("edited", "new"), ("stuck", "new"))
    ctx = context(tmp_path, new, jobs)
    ctx.ledger.reconcile(new)
    engine_side = changed_since_completed(ctx.ledger.jobs.values(), ctx.ledger.specs)
    records = [job.to_json() for job in ctx.ledger.jobs.values()]
    assert [job.id for job in engine_side] == ["changed"]
    assert client_side(records, new) == {"changed": "new"}  # type: ignore[arg-type]
