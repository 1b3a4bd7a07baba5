"""The header says FINISHED only while the engine says every job has finished, and a finished
run's elapsed time stands still: an engine over an in-memory host, its events applied to the
UI's run view as a live UI gets them (issue 43: the header said FINISHED while an added job ran,
and a reopened finished run's elapsed time kept ticking)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from eq_tui.api.events import Event, QueueFinished, QueueReopened
from eq_tui.api.model import JobStatus
from eq_tui.engine.engine import Engine
from eq_tui.tui.header import header_content
from eq_tui.tui.run_view import RunView
from tests.integration.test_ledger import started


def drained(queue: asyncio.Queue[Event]) -> list[Event]:
    events = []
    while not queue.empty():
        events.append(queue.get_nowait())
    return events


def header(view: RunView, now: float) -> str:
    return header_content(view, now).plain


def elapsed(view: RunView, now: float) -> str:
    return header(view, now).split("elapsed ", 1)[1].split()[0]


def active_or_waiting(engine: Engine) -> list[str]:
    return [job.id for job in engine.jobs.values() if not job.status.is_finished]


async def test_the_header_never_says_finished_while_a_job_waits_or_runs(tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a"])
    queue = engine.subscribe()
    view = RunView()
    view.load_snapshot(engine.snapshot())

    def follow() -> list[Event]:
        """What a UI does: the events that came, applied before it draws (an engine step
        publishes its events together, and the UI applies what is queued before a frame)."""
        events = drained(queue)
        for event in events:
            view.apply(event)
        said = "FINISHED" in header(view, host.now)
        assert not (said and active_or_waiting(engine)), (events, active_or_waiting(engine))
        return events

    await engine.tick()
    follow()
    host.now += 30
    host.finish("a", 0)
    await engine.tick()
    assert any(isinstance(e, QueueFinished) for e in follow())
    assert "FINISHED" in header(view, host.now)

    added = await engine.command("add", [], {"id": "x", "cmd": "train x"})
    assert added["ok"], added
    reopened = follow()
    assert any(isinstance(e, QueueReopened) for e in reopened), reopened
    assert "FINISHED" not in header(view, host.now) and "pending 1" in header(view, host.now)
    await engine.tick()
    follow()
    assert engine.jobs["x"].status == JobStatus.RUNNING
    assert "FINISHED" not in header(view, host.now)
    host.now += 10
    host.finish("x", 0)
    await engine.tick()
    follow()
    assert "FINISHED" in header(view, host.now)
    engine.ctx.run_dir.release_lock()


async def test_a_finished_runs_elapsed_time_stands_still_also_when_reopened(
        tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a"])
    created = engine.ctx.created
    await engine.tick()
    host.now += 95
    host.finish("a", 0)
    await engine.tick()
    assert engine.finished
    view = RunView()
    view.load_snapshot(engine.snapshot())
    ended = engine.jobs["a"].history[-1].end
    assert ended is not None and engine.finished_at == ended
    first = elapsed(view, host.now)
    assert first == elapsed(view, host.now + 3600) == elapsed(view, ended)
    assert first != elapsed(RunView(), host.now)  # the figure is the run's, not a dash

    # the run opened again an hour later (a new engine over its run dir): the same figure
    engine.persistence.persist(whole=True)
    engine.ctx.run_dir.release_lock()
    host.now += 3600
    again = Engine(engine.manifest, tmp_path / "run", {"m": host},  # type: ignore[dict-item]
                   clock=lambda: host.now, watch=False)
    await again.start(preflight=False)
    await again.tick()
    assert again.finished and again.ctx.created == created
    reopened = RunView()
    reopened.load_snapshot(again.snapshot())
    assert elapsed(reopened, host.now) == first == elapsed(reopened, host.now + 600)
    again.ctx.run_dir.release_lock()

