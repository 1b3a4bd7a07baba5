"""A search while it runs: why it asks no new trial now (launching paused, its phase held by
the crash guard or by a person), and how many trials it has asked (what `eq-tui edit --search
trials=N` may not go below). Its trials out run to their end and are told either way."""

from __future__ import annotations

from eq_tui.engine.context import RunContext

ORIGIN = "search"  # a trial job's origin (search_trials.py adds them)


def asks_nothing(ctx: RunContext, phase: str) -> str | None:
    """Why the search of `phase` asks no new trial now, or None when it may."""
    if ctx.paused:
        return "launching is paused"
    if phase in ctx.crash_guard.held:
        return "the crash guard holds its phase"
    if phase in ctx.search_edits.held:
        return f"held ({ctx.search_edits.held[phase]})"
    return None


def trials_asked(ctx: RunContext, phase: str) -> int:
    """Trials the search of `phase` has asked: Optuna numbers a study's trials 0, 1, ... as
    asked, and every asked trial's jobs are in the ledger (a restarted engine makes again those
    it lacks), so one past the highest number there."""
    numbers = [int(job.params["trial"]) for job in ctx.ledger.jobs.values()
               if job.phase == phase and job.origin == ORIGIN
               and job.params.get("trial", "").isdigit()]
    return max(numbers, default=-1) + 1
