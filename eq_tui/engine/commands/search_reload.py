"""What a reload may change of a running search. Its `trials` and GPU-hours budget: applied for
the rest of the run, like `eq-tui edit --search` (but a person's edit stays unless --force).
Its space, sampler, seed, metric, goal or grid: refused, the whole reload with it — the study
began with them, and Optuna would mix trials of two searches in one; a new phase (its own
study) is the way."""

from __future__ import annotations

from dataclasses import replace

from eq_tui.engine.state.search_edits import Amounts, amounts_of
from eq_tui.manifest.model import DEFAULT_PHASE, Manifest, PhaseSpec

# what a study keeps from its start; the key each is written under in the manifest
FIXED = (("space", "search.space"), ("sampler", "search.sampler"), ("seed", "search.seed"),
         ("metric", "search.metric"), ("goal", "search.goal"), ("grid", "grid"))


def _key_path(manifest: Manifest, phase: str, key: str) -> str:
    names = [p.name for p in manifest.phases]
    if names == [DEFAULT_PHASE]:
        return key
    return f"phases[{names.index(phase)}].{key}"


def search_refusal(old: Manifest, new: Manifest) -> str | None:
    """Why a reload from `old` to `new` is refused: a search in both whose study-defining keys
    changed (the first such key, named by its path in the new file), or None."""
    by_name = {phase.name: phase for phase in new.phases}
    for phase in old.phases:
        other = by_name.get(phase.name)
        if phase.search is None or other is None or other.search is None:
            continue
        for field, key in FIXED:
            if getattr(phase.search, field) != getattr(other.search, field):
                path = _key_path(new, phase.name, key)
                return (f"{path} changed (phase {phase.name}'s search): a search keeps the "
                        f"{field} its study began with. To search anew, write the new search "
                        "in a new phase (its own study; depends_on this one to run after it) "
                        "and start the run with it")
    return None


def amount_changes(old_file: dict[str, Amounts], new: Manifest) -> dict[str, Amounts]:
    """Phases whose search amounts the file changed: `old_file`, per searching phase, what
    the file said before (a person's edits aside); each one's new amounts."""
    changes: dict[str, Amounts] = {}
    for phase in new.phases:
        if phase.search is None or phase.name not in old_file:
            continue
        if amounts_of(phase.search) != old_file[phase.name]:
            changes[phase.name] = amounts_of(phase.search)
    return changes


def without_amounts(phase: PhaseSpec) -> PhaseSpec:
    """The phase as a restart would differ in it: a search's amounts are applied live."""
    if phase.search is None:
        return phase
    return replace(phase, search=replace(phase.search, trials=None, gpu_hours=None))
