"""`early_stop:` in Optuna's words: the pruner a search's study is given for each rule.

One vocabulary for grids and searches: a grid's jobs are judged by eq-tui's own rule
(engine/decide/pruning.py), a search's trials by the Optuna pruner the same keys map onto. A
trial's step is its report's number (1, 2, ...), as early stopping counts them, so:

- median -> MedianPruner: judged from report `grace` on (n_warmup_steps = grace, every report:
  interval_steps 1) against the median at that report of the completed trials (from the first
  one: n_startup_trials 1, n_min_trials 1). Optuna compares the trial's best report so far.
- asha -> SuccessiveHalvingPruner: rungs at grace * eta^k reports (min_resource = grace,
  reduction_factor = eta, min_early_stopping_rate 0), the best 1/eta at a rung go on
  (bootstrap_count 0: nothing waits for a rung to fill).
- hyperband -> HyperbandPruner: brackets of successive halving from grace reports with eta,
  up to the report count of the first completed trial (max_resource "auto").

No early_stop: NopPruner (the journal keeps no pruner: the study is given one each open).
"""

from __future__ import annotations

from typing import Any

from eq_tui.manifest.model import EarlyStopSpec

PrunerArgs = tuple[str, tuple[tuple[str, int | str], ...]]


def pruner_args(spec: EarlyStopSpec | None) -> PrunerArgs:
    """The Optuna pruner's class name and keyword arguments for `spec`."""
    if spec is None:
        return "NopPruner", ()
    if spec.rule == "median":
        return "MedianPruner", (("n_startup_trials", 1), ("n_warmup_steps", spec.grace),
                                ("interval_steps", 1), ("n_min_trials", 1))
    if spec.rule == "asha":
        return "SuccessiveHalvingPruner", (("min_resource", spec.grace),
                                           ("reduction_factor", spec.eta),
                                           ("min_early_stopping_rate", 0),
                                           ("bootstrap_count", 0))
    return "HyperbandPruner", (("min_resource", spec.grace), ("max_resource", "auto"),
                               ("reduction_factor", spec.eta), ("bootstrap_count", 0))


def make_pruner(optuna: Any, args: PrunerArgs) -> Any:
    name, kwargs = args
    return getattr(optuna.pruners, name)(**dict(kwargs))
