"""A search's Optuna study, kept in `<run dir>/optuna.journal` (Optuna's journal file storage,
which `optuna-dashboard` and `optuna.load_study` read), named after its phase.

Optuna is imported when a study is opened, never at import time: a run without a search
needs no Optuna. Asking and telling go straight to the journal, so a kill -9 of the engine
loses no finished trial; a trial asked and never told is still open when the study is
reopened, with its parameters, for the engine to adopt.

Optuna's journal lock (`optuna.journal.lock`, made by each write and removed after it) is left
behind when a writer is killed while holding it, and Optuna waits 30 s before taking it over.
The engine holds the run dir's own lock, so a journal lock there when it opens the study is
stale: `clear_stale_lock` removes it then.

The sampler is seeded with `seed` plus the number of trials already in the study: the same
study from scratch asks the same, and a reopened one does not start its sampling over.

With `early_stop:`, a trial's reports are its intermediate values (`report`), each step written
once (a step already in the journal is skipped: after a kill -9, or a resumed attempt making
its reports again), and after each the pruner for the rule (runfiles/search_pruners.py) judges
it, as `trial.should_prune()` would. A verdict to prune is kept in the journal too (the trial's
user attribute `eq_tui_pruned_at`): an engine killed before it stopped the trial's jobs stops
them when it comes back, though the pruner would not say it again.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from eq_tui.manifest.model import EarlyStopSpec, SearchParam, SearchSpec
from eq_tui.manifest.search_keys import INSTALL_HINT, SAMPLER_NEEDS
from eq_tui.manifest.search_trials import value_text
from eq_tui.runfiles.search_pruners import make_pruner, pruner_args

JOURNAL_NAME = "optuna.journal"
# optuna.storages.journal's JournalFileSymlinkLock/OpenLock: `<journal>.lock`, and
# `<journal>.lock<uuid>.rename` for a moment while it is released
LOCK_SUFFIX = ".lock"
RENAME_SUFFIX = ".rename"
Outcome = Literal["complete", "fail", "pruned"]
PRUNED_AT = "eq_tui_pruned_at"  # a trial's user attribute: the report its pruner pruned it at


class SearchUnavailable(Exception):
    """Optuna (or what the sampler needs) is not installed."""


@dataclass(frozen=True)
class Reported:
    """A trial after `report`: its last step in the journal (0: none), and where its pruner
    said prune (None: it goes on) with its value there and the other trials' values there."""

    last_step: int
    pruned_at: int | None = None
    value: float = 0.0
    others: tuple[float, ...] = ()


@dataclass(frozen=True)
class OpenTrial:
    number: int
    values: dict[str, str]  # name -> the text written into the command


def journal_path(run_dir: Path) -> Path:
    return run_dir / JOURNAL_NAME


def clear_stale_lock(run_dir: Path) -> bool:
    """Remove the journal's lock files a killed writer left; True when there was one. Only for
    the holder of the run dir's engine lock, when it opens the study: then no eq-tui process
    writes the journal."""
    lock = run_dir / (JOURNAL_NAME + LOCK_SUFFIX)
    cleared = False
    for path in [lock, *run_dir.glob(f"{JOURNAL_NAME}{LOCK_SUFFIX}*{RENAME_SUFFIX}")]:
        if os.path.lexists(path):  # the lock is a symlink to the journal: lexists, not exists
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                cleared = cleared or path == lock
    return cleared


def _optuna() -> Any:
    try:
        optuna = importlib.import_module("optuna")
    except ImportError:
        raise SearchUnavailable(f"a search needs Optuna: {INSTALL_HINT}") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


class SearchStudy:
    def __init__(self, run_dir: Path, phase: str, search: SearchSpec,
                 early_stop: EarlyStopSpec | None = None) -> None:
        optuna = _optuna()
        self._optuna = optuna
        self.search = search
        self.phase = phase
        journal = optuna.storages.journal
        storage = optuna.storages.JournalStorage(
            journal.JournalFileBackend(str(journal_path(run_dir))))
        self._storage = storage
        existing = self._existing_trials(storage, phase)
        self._pruner = pruner_args(early_stop)
        self._study = optuna.create_study(
            study_name=phase, storage=storage, load_if_exists=True,
            pruner=make_pruner(optuna, self._pruner),
            direction="maximize" if search.goal == "max" else "minimize",
            sampler=_sampler(optuna, search.sampler,
                             None if search.seed is None else search.seed + existing))
        self._distributions = {p.name: _distribution(optuna, p) for p in search.space}

    def _existing_trials(self, storage: Any, phase: str) -> int:
        try:
            study_id = storage.get_study_id_from_name(phase)
        except KeyError:
            return 0
        return len(storage.get_all_trials(study_id, deepcopy=False))

    def ask(self) -> OpenTrial:
        trial = self._study.ask(self._distributions)
        return OpenTrial(trial.number, self._values(trial.params))

    def tell(self, number: int, outcome: Outcome, value: float | None = None) -> None:
        """Tell how trial `number` ended; telling a finished trial again does nothing."""
        state = self._optuna.trial.TrialState
        if self.state(number) != "running":
            return
        if outcome == "complete":
            if value is None or not math.isfinite(value):
                self._study.tell(number, state=state.FAIL)
            else:
                self._study.tell(number, value)
        elif outcome == "pruned":
            self._study.tell(number, state=state.PRUNED)
        else:
            self._study.tell(number, state=state.FAIL)

    def use_pruner(self, early_stop: EarlyStopSpec | None) -> None:
        """The pruner for `early_stop` from now on (a person's edit changes it mid-run)."""
        args = pruner_args(early_stop)
        if args != self._pruner:
            self._pruner = args
            self._study.pruner = make_pruner(self._optuna, args)

    def report(self, number: int, values: Sequence[tuple[int, float]],
               judge: bool = True) -> Reported:
        """Tell trial `number` its intermediate values (step, value), in order, each step once,
        asking its pruner after each; stops at a verdict to prune. A trial pruned before (its
        mark in the journal) says so again without a report; a told one takes none. `judge`
        False (its jobs have ended): the pruner still sees each report (successive halving
        records the trial's rungs there, for the others to compete with), its verdict unused."""
        trial = next((t for t in self._trials() if t.number == number), None)
        if trial is None:
            return Reported(0)
        done = dict(trial.intermediate_values)
        last = max(done, default=0)
        marked = trial.user_attrs.get(PRUNED_AT)
        if isinstance(marked, int) and marked in done:
            return self._verdict(number, marked, done[marked], last)
        if trial.state != self._optuna.trial.TrialState.RUNNING:
            return Reported(last)
        storage = self._storage
        trial_id = trial._trial_id
        for step, value in values:
            if step in done:
                continue
            storage.set_trial_intermediate_value(trial_id, step, value)
            done[step] = value
            last = max(last, step)
            if self._study.pruner.prune(self._study, storage.get_trial(trial_id)) and judge:
                storage.set_trial_user_attr(trial_id, PRUNED_AT, step)
                return self._verdict(number, step, value, last)
        return Reported(last)

    def _verdict(self, number: int, step: int, value: float, last: int) -> Reported:
        others = tuple(t.intermediate_values[step] for t in self._trials()
                       if t.number != number and step in t.intermediate_values)
        return Reported(last, step, value, others)

    def state(self, number: int) -> str:
        """running | complete | fail | pruned | waiting, or missing for an unknown number."""
        for trial in self._trials():
            if trial.number == number:
                return str(trial.state.name).lower()
        return "missing"

    def open_trials(self) -> list[OpenTrial]:
        """Trials asked and not yet told, oldest first (after a crash: the ones to adopt)."""
        running = self._optuna.trial.TrialState.RUNNING
        return [OpenTrial(t.number, self._values(t.params)) for t in self._trials()
                if t.state == running]

    def asked(self) -> int:
        """Trials asked so far, however they ended (the count `trials:` bounds)."""
        return len(self._trials())

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for trial in self._trials():
            name = str(trial.state.name).lower()
            out[name] = out.get(name, 0) + 1
        return out

    def _trials(self) -> list[Any]:
        return list(self._study.get_trials(deepcopy=False))

    def _values(self, params: dict[str, Any]) -> dict[str, str]:
        return {p.name: value_text(p, params[p.name]) for p in self.search.space
                if p.name in params}


def _sampler(optuna: Any, name: str, seed: int | None) -> Any:
    missing = [module for module in SAMPLER_NEEDS.get(name, ())
               if importlib.util.find_spec(module) is None]
    if missing:
        raise SearchUnavailable(f"sampler {name!r} needs {' and '.join(missing)} "
                                f"(pip install {' '.join(missing)})")
    samplers = optuna.samplers
    if name == "tpe":
        return samplers.TPESampler(seed=seed)
    if name == "gp":
        return samplers.GPSampler(seed=seed)
    if name == "cmaes":
        return samplers.CmaEsSampler(seed=seed)
    if name == "qmc":
        return samplers.QMCSampler(seed=seed, scramble=True, warn_asynchronous_seeding=False)
    return samplers.RandomSampler(seed=seed)


def _distribution(optuna: Any, param: SearchParam) -> Any:
    dists = optuna.distributions
    if param.choices:
        return dists.CategoricalDistribution(list(param.choices))
    if param.integer:
        return dists.IntDistribution(int(param.low), int(param.high), log=param.log,
                                     step=int(param.step or 1))
    return dists.FloatDistribution(param.low, param.high, log=param.log, step=param.step)
