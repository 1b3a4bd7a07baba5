"""What `eq-tui results` says of a run's searches, read from `<run dir>/optuna.journal`: per
study (one per phase with a `search:`), its trials by state, the best trial with its value and
parameters, the trials' values in the order told with the best so far (search_curve.py), and
which parameters mattered (Optuna's PED-ANOVA importance evaluator: it needs no
scikit-learn, and the same study always reads the same). Reading the journal takes no lock: it
works while the engine runs. No journal: nothing to say; a journal and no Optuna installed:
`optuna_missing` says how to install it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eq_tui.manifest.search_keys import INSTALL_HINT
from eq_tui.runfiles.search_curve import CurvePoint, Told, curve, plot
from eq_tui.runfiles.search_study import journal_path


@dataclass(frozen=True)
class StudySummary:
    name: str
    direction: str  # maximize | minimize
    trials: dict[str, int]  # state (complete, running, ...) -> how many
    best: int | None = None  # the best complete trial's number
    best_value: float | None = None
    best_params: dict[str, Any] = field(default_factory=dict)
    importance: dict[str, float] = field(default_factory=dict)  # most important first
    curve: list[CurvePoint] = field(default_factory=list)  # the told trials, in order told

    def to_json(self) -> dict[str, Any]:
        return {"study": self.name, "direction": self.direction, "trials": self.trials,
                "best_trial": self.best, "best_value": self.best_value,
                "best_params": self.best_params, "importance": self.importance,
                "curve": [point.to_json() for point in self.curve]}

    def text(self) -> str:
        counts = ", ".join(f"{state} {n}" for state, n in sorted(self.trials.items()))
        lines = [f"search {self.name} ({self.direction}): {counts or 'no trials'}"]
        if self.best is not None:
            params = " ".join(f"{k}={v}" for k, v in self.best_params.items())
            lines.append(f"  best: trial {self.best}, {self.best_value:.6g} ({params})")
        if self.importance:
            lines.append("  importance: " + ", ".join(
                f"{name} {share:.2f}" for name, share in self.importance.items()))
        lines += ["  " + line for line in plot(self.curve, self.direction == "maximize")]
        return "\n".join(lines) + "\n"


def optuna_missing(run_dir: Path) -> str | None:
    """What to say of a run with a search (its journal) read where Optuna is not installed."""
    if not journal_path(run_dir).is_file():
        return None
    try:
        importlib.import_module("optuna")
    except ImportError:
        return f"this run has a search; to see its trials here: {INSTALL_HINT}"
    return None


def read_searches(run_dir: Path) -> list[StudySummary]:
    path = journal_path(run_dir)
    if not path.is_file():
        return []
    try:
        optuna = importlib.import_module("optuna")
    except ImportError:
        return []
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(path)))
    return [_summary(optuna, optuna.load_study(study_name=name, storage=storage))
            for name in sorted(optuna.study.get_all_study_names(storage))]


def _summary(optuna: Any, study: Any) -> StudySummary:
    trials: dict[str, int] = {}
    told = []
    for trial in study.get_trials(deepcopy=False):
        state = str(trial.state.name).lower()
        trials[state] = trials.get(state, 0) + 1
        ended = trial.datetime_complete
        told.append(Told(trial.number, state, None if trial.value is None else float(trial.value),
                         None if ended is None else ended.timestamp()))
    direction = str(study.direction.name).lower()
    series = curve(told, maximize=direction == "maximize")
    if not trials.get("complete"):
        return StudySummary(study.study_name, direction, trials, curve=series)
    best = study.best_trial
    importance = _importance(optuna, study) if trials["complete"] >= 2 else {}
    return StudySummary(study.study_name, direction, trials, best.number, float(best.value),
                        dict(best.params), importance, series)


def _importance(optuna: Any, study: Any) -> dict[str, float]:
    """Empty while it cannot be told (under two complete trials, or every value the same)."""
    try:
        evaluator = optuna.importance.PedAnovaImportanceEvaluator()
        found = optuna.importance.get_param_importances(study, evaluator=evaluator)
    except (ImportError, ValueError, RuntimeError, ZeroDivisionError):
        return {}
    return {name: float(share) for name, share in found.items()}
