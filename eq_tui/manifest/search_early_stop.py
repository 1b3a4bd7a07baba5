"""`early_stop:` beside a `search:` (or without one): what only a search may say.

A search's trials are judged by Optuna's pruner for the rule, and an Optuna pruner compares
intermediate values the way the study goes: the metric early stopping reads must be better the
same way as the search's (a val_loss to minimise beside a val_acc search would prune the best
trials). `hyperband` is Optuna's alone: a scope without a search has no Optuna to ask.
"""

from __future__ import annotations

from typing import Any

from eq_tui.manifest.model import Goal, ResultsSpec
from eq_tui.manifest.schema import Context
from eq_tui.manifest.yaml_lines import Path_

OPTUNA_ONLY = "hyperband"


def check_early_stop(ctx: Context, raw: dict[str, Any], path: Path_, results: ResultsSpec,
                     search: tuple[str, Goal] | None) -> None:
    """`raw`/`path`: the scope (the top level, or a phase); `search`: its search's metric and
    goal, None without a search. A phase's early_stop is its own key, else the top level's."""
    spec = results.early_stop
    if spec is None:
        return
    own = "early_stop" in raw
    where: Path_ = (*path, "early_stop") if own else ("early_stop",)
    scope = f"phase {raw.get('name')!r}" if path else "the manifest"
    if search is None:
        if spec.rule == OPTUNA_ONLY:
            ctx.fail(f"rule {OPTUNA_ONLY} is Optuna's pruner, for the trials of a search, and "
                     f"{scope} has no search: use asha or median", (*where, "rule"))
        return
    metric, goal = search
    if spec.goal != goal:
        ctx.fail(f"early_stop reads {spec.metric} ({spec.goal}), but the search of {scope} "
                 f"wants {metric} {goal}: Optuna's pruners compare the reports the way the "
                 f"study goes, so early_stop's metric must be better the same way ({goal})",
                 (*where, "goal") if own and isinstance(raw["early_stop"], dict)
                 and "goal" in raw["early_stop"] else (*where, "metric"))
