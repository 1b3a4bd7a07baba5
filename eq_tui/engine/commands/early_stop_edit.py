"""`eq-tui edit RUN_DIR --early-stop off | on | eta=N,grace=N [--phase NAME]`: early stopping
for the rest of the run, without editing the manifest. Like a reload's change of `early_stop`,
the reports so far stay and the next ones are judged by the new setting; unlike it, the change
is a person's: kept across an engine restart (state/early_stop_edits.py) and left alone by a
reload unless --force."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from eq_tui.api.client import CommandResult
from eq_tui.api.command_result import result
from eq_tui.api.commands import SetEarlyStop
from eq_tui.engine.commands.reload import early_stop_text
from eq_tui.engine.context import RunContext
from eq_tui.manifest.model import EarlyStopSpec


def _whole(value: Any, least: int, name: str) -> tuple[int | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, (int, str)) \
            or not str(value).strip().lstrip("-").isdigit() or int(value) < least:
        return None, f"{name} must be a whole number of at least {least}, not {value!r}"
    return int(value), None


def set_early_stop(ctx: RunContext, command: SetEarlyStop) -> CommandResult:
    state = command.state
    if state not in (None, "on", "off"):
        return result(error=f"early-stop: {state!r} is neither on nor off")
    eta, bad_eta = _whole(command.eta, 2, "eta")
    grace, bad_grace = _whole(command.grace, 1, "grace")
    if bad_eta or bad_grace:
        return result(error=f"early-stop: {bad_eta or bad_grace}")
    if state is None and eta is None and grace is None:
        return result(error="early-stop: say off, on, eta=N or grace=N")
    if state == "off" and (eta is not None or grace is not None):
        return result(error="early-stop: off takes no eta or grace")
    names = [p.name for p in ctx.manifest.phases]
    if command.phase is not None and command.phase not in names:
        return result(error=f"early-stop: no phase {command.phase!r} (phases: "
                            f"{', '.join(names)})")
    edits = ctx.early_stop_edits
    phases = [command.phase] if command.phase is not None else [
        name for name in names if ctx.manifest.phase(name).results.early_stop is not None
        or edits.manifests(name, ctx.manifest) is not None]
    if not phases:
        return result(error="early-stop: no phase has early_stop (the manifest sets none)")
    by = f"edit by {command.by}" if command.by else "edit"
    answers: dict[str, str] = {}
    for phase in phases:
        now = ctx.manifest.phase(phase).results.early_stop
        base = edits.manifests(phase, ctx.manifest) if state == "on" else now
        if state == "off":
            spec: EarlyStopSpec | None = None
        elif base is None:
            answers[f"phase {phase}"] = ("the manifest has no early_stop for it" if state == "on"
                                         else "early stopping is off: `--early-stop on` first")
            continue
        else:
            spec = replace(base, eta=base.eta if eta is None else eta,
                           grace=base.grace if grace is None else grace)
        as_the_manifest = state == "on" and spec == edits.manifests(phase, ctx.manifest)
        ctx.replace_manifest(edits.set(ctx.manifest, phase, spec))
        if as_the_manifest:
            edits.forget(phase)  # as the manifest says: a reload's changes apply again
        ctx.bus.alert("info", f"phase {phase}: early_stop is now {early_stop_text(spec)} "
                              f"for the rest of the run ({by})")
        answers[f"phase {phase}"] = "ok"
    ctx.ledger.unsaved = True  # the state file's early_stop_edits
    return result(answers)
