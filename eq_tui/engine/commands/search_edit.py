"""A person's hand on a running search. `eq-tui edit RUN_DIR --search trials=N,gpu_hours=H
[--phase P]`: how much it may ask, for the rest of the run (kept across an engine restart, and
by a reload unless --force; never fewer trials than it has asked). `eq-tui hold RUN_DIR --phase
P`: it asks no new trial until `eq-tui release RUN_DIR --phase P`; its trials out run to their
end and are told. A search extended after it had ended asks again: the queue opens again."""

from __future__ import annotations

import math
from typing import Any

from eq_tui.api.client import CommandResult
from eq_tui.api.command_result import result
from eq_tui.api.commands import SetSearch
from eq_tui.engine.context import RunContext
from eq_tui.engine.state.search_edits import Amounts, amounts_of
from eq_tui.engine.tick.search_live import trials_asked
from eq_tui.manifest.model import Manifest


def search_phase(manifest: Manifest, phase: str | None) -> tuple[str | None, str | None]:
    """The phase whose search a command names (None: the only one that has a search), or why
    there is none."""
    searching = [p.name for p in manifest.phases if p.search is not None]
    if phase is None:
        if len(searching) == 1:
            return searching[0], None
        if not searching:
            return None, "no phase has a search"
        return None, f"several phases search ({', '.join(searching)}): name one with --phase"
    names = [p.name for p in manifest.phases]
    if phase not in names:
        return None, f"no phase {phase!r} (phases: {', '.join(names)})"
    if phase not in searching:
        return None, f"phase {phase} has no search"
    return phase, None


def trials_value(value: Any) -> tuple[int | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, (int, str)) \
            or not str(value).strip().isdigit() or int(value) < 1:
        return None, f"trials must be a whole number of at least 1, not {value!r}"
    return int(value), None


def hours_value(value: Any) -> tuple[float | None, str | None]:
    if value is None:
        return None, None
    try:
        hours = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        hours = math.nan
    if not math.isfinite(hours) or hours <= 0:
        return None, f"gpu_hours must be a number above 0, not {value!r}"
    return hours, None


def fewer_than_asked(trials: int | None, asked: int) -> str | None:
    """Why `trials` cannot be set when the study has asked `asked` already."""
    if trials is not None and trials < asked:
        return (f"it has asked {asked} trials already: trials can be {asked} or more, not "
                f"{trials}")
    return None


def amounts_text(amounts: Amounts) -> str:
    trials, hours = amounts
    parts = ([f"{trials} trials"] if trials is not None else []) + (
        [f"{hours:g} GPU-hours"] if hours is not None else [])
    return " and ".join(parts) or "nothing"


def set_search(ctx: RunContext, command: SetSearch) -> CommandResult:
    trials, bad_trials = trials_value(command.trials)
    hours, bad_hours = hours_value(command.gpu_hours)
    if bad_trials or bad_hours:
        return result(error=f"search: {bad_trials or bad_hours}")
    if trials is None and hours is None:
        return result(error="search: say trials=N and/or gpu_hours=H")
    phase, why = search_phase(ctx.manifest, command.phase)
    if phase is None:
        return result(error=f"search: {why}")
    search = ctx.manifest.phase(phase).search
    assert search is not None
    asked = trials_asked(ctx, phase)
    too_few = fewer_than_asked(trials, asked)
    if too_few:
        return result(error=f"search of phase {phase}: {too_few}")
    now = amounts_of(search)
    amounts = (now[0] if trials is None else trials, now[1] if hours is None else hours)
    ctx.replace_manifest(ctx.search_edits.set(ctx.manifest, phase, amounts))
    by = f"edit by {command.by}" if command.by else "edit"
    ctx.bus.alert("info", f"phase {phase}: the search now asks up to {amounts_text(amounts)} "
                          f"({asked} asked so far; {by})")
    ctx.ledger.unsaved = True  # the state file's search_edits
    return result({f"phase {phase}": "ok"}, detail={
        "phase": phase, "trials": amounts[0], "gpu_hours": amounts[1], "asked": asked})


def hold_search(ctx: RunContext, phase: str, by: str) -> str:
    """A person's hold on the search of `phase`: it asks no new trial until released."""
    name, why = search_phase(ctx.manifest, phase)
    if name is None:
        return (f"{why}: hold its jobs by id or with --filter 'phase:{phase}'"
                if why and "has no search" in why else str(why))
    if name in ctx.search_edits.held:
        return "already held"
    ctx.search_edits.held[name] = by
    ctx.bus.alert("info", f"phase {name}: its search is held ({by}); it asks no new trial "
                          "until released, and its trials out run to their end")
    ctx.ledger.unsaved = True
    return "ok"


def release_search(ctx: RunContext, phase: str, by: str) -> bool:
    """The person's hold on the search of `phase` lifted; False when there was none."""
    if ctx.search_edits.held.pop(phase, None) is None:
        return False
    ctx.bus.alert("info", f"phase {phase}: its search is released ({by}); it asks trials again")
    ctx.ledger.unsaved = True
    return True
