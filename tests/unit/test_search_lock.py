"""Optuna's journal lock never stalls the engine (engine/tick/search_trials.py with the real
Optuna): a lock left by an engine killed while writing is cleared when the next engine opens
the study, which asks at once (Optuna alone would wait 30 s for it); and while a live writer
holds the lock, telling waits off the event loop."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from eq_tui.api.model import JobStatus
from eq_tui.engine.tick.search_trials import SearchTrials
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import Manifest
from eq_tui.runfiles.search_study import SearchStudy, clear_stale_lock
from tests.support.context_bed import context

MANIFEST = """
project: p
goal: {val_acc: max}
search:
  space: {lr: {low: 0.001, high: 0.1, log: true}}
  trials: 3
  sampler: random
  seed: 0
template: {cmd: "train --lr ${lr}"}
"""


def manifest() -> Manifest:
    return load_manifest_text(MANIFEST, "m.yaml")


def leave_lock(run_dir: Path) -> Path:
    """The lock as Optuna's JournalFileSymlinkLock makes it: a symlink to the journal."""
    lock = run_dir / "optuna.journal.lock"
    os.symlink(run_dir / "optuna.journal", lock)
    return lock


async def test_a_lock_left_by_a_killed_engine_is_cleared_and_the_next_engine_asks_at_once(
        tmp_path: Path) -> None:
    first = SearchStudy(tmp_path, "main", manifest().phases[0].search)  # type: ignore[arg-type]
    first.ask()
    lock = leave_lock(tmp_path)  # then a kill -9 inside Optuna's write
    renamed = tmp_path / "optuna.journal.lock0b6e.rename"
    renamed.write_text("")  # killed while releasing
    ctx = context(tmp_path, manifest())
    trials = SearchTrials(ctx, lambda job: False)
    started = time.monotonic()
    await asyncio.wait_for(trials.step(), timeout=20)
    assert time.monotonic() - started < 10  # Optuna's own wait is 30 s
    assert not os.path.lexists(lock) and not renamed.exists()
    assert "t0" in ctx.ledger.jobs  # the open trial adopted, not asked again
    assert [a["message"] for a in ctx.bus.alerts] == [
        "search: removed optuna.journal's lock, left by an engine killed while writing it"]
    job = ctx.ledger.jobs["t0"]
    job.status, job.metrics = JobStatus.COMPLETED, {"val_acc": 0.5}
    await asyncio.wait_for(trials.step(), timeout=20)
    assert trials.studies["main"].counts() == {"complete": 1, "running": 1}
    assert "t1" in ctx.ledger.jobs


async def test_while_a_live_writer_holds_the_lock_telling_waits_off_the_event_loop(
        tmp_path: Path) -> None:
    ctx = context(tmp_path, manifest())
    trials = SearchTrials(ctx, lambda job: False)
    await trials.step()
    job = ctx.ledger.jobs["t0"]
    job.status, job.metrics = JobStatus.COMPLETED, {"val_acc": 0.5}
    lock = leave_lock(tmp_path)  # say optuna-dashboard, writing a note
    step = asyncio.create_task(trials.step())
    started, beats = time.monotonic(), 0
    while beats < 20:  # the loop keeps turning while the tell waits for the lock
        await asyncio.sleep(0.01)
        beats += 1
    assert not step.done() and time.monotonic() - started < 5
    lock.unlink()  # the writer is done
    await asyncio.wait_for(step, timeout=20)
    assert trials.studies["main"].state(0) == "complete"


def test_clearing_touches_only_the_journal_lock_files(tmp_path: Path) -> None:
    assert clear_stale_lock(tmp_path) is False
    keep = [tmp_path / name for name in ("optuna.journal", "engine.lock", "other.lock",
                                         "optuna.journal.lockx.renamed")]
    for path in keep:
        path.write_text("x")
    (tmp_path / "optuna.journal.lock").write_text("")  # JournalFileOpenLock's: a plain file
    assert clear_stale_lock(tmp_path) is True
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in keep)
    (tmp_path / "optuna.journal.lock1.rename").write_text("")
    assert clear_stale_lock(tmp_path) is False  # only a leftover of a release: no lock held
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in keep)
