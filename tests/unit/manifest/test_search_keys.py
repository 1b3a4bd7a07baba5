"""The `search:` key (manifest/search_keys.py) and a trial's jobs (manifest/search_trials.py):
what a search parses to, each mistake exit 2 with its key path (as `--dry-run` shows it), and
the values Optuna asks written into each trial's jobs."""

from __future__ import annotations

import sys

import pytest

from eq_tui.errors import ManifestError
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import Manifest, SearchParam, SearchSpec
from eq_tui.manifest.search_trials import describe_search, trial_jobs, value_text

BASE = """
project: p
goal: {val_acc: max, loss: min}
search:
  metric: val_acc
  space:
    lr: {low: 1.0e-4, high: 1.0, log: true}
    width: [64, 128, 256]
    dropout: {low: 0.0, high: 0.5, step: 0.05}
    layers: {low: 2, high: 8, step: 2}
  trials: 6
  budget: {gpu_hours: 1.5}
  sampler: random
  seed: 3
grid: {seed: [1, 2]}
template:
  cmd: "train --lr ${lr} --width ${width} --dropout ${dropout} --layers ${layers} --seed ${seed}"
  metrics: {json: "out/${trial}/m.json"}
"""


def load(text: str) -> Manifest:
    return load_manifest_text(text, "m.yaml")


def search_of(text: str, phase: int = 0) -> SearchSpec:
    spec = load(text).phases[phase].search
    assert spec is not None
    return spec


def error(text: str) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        load(text)
    assert info.value.exit_code == 2
    return info.value


def test_a_search_parses_its_space_amount_sampler_and_metric() -> None:
    m = load(BASE)
    assert m.jobs == ()  # the grid beside a search makes no jobs of its own
    search = m.phases[0].search
    assert search is not None
    lr, width, dropout, layers = search.space
    assert lr == SearchParam("lr", 1e-4, 1.0, log=True)
    assert width == SearchParam("width", choices=("64", "128", "256"))
    assert dropout == SearchParam("dropout", 0.0, 0.5, step=0.05)
    assert layers == SearchParam("layers", 2, 8, step=2, integer=True)
    assert (search.trials, search.gpu_hours, search.sampler, search.seed) == (6, 1.5, "random", 3)
    assert (search.metric, search.goal) == ("val_acc", "max")
    assert search.grid == (("seed", ("1", "2")),)


def test_the_goal_gives_the_metric_and_direction_and_search_goal_wins() -> None:
    text = BASE.replace("goal: {val_acc: max, loss: min}", "goal: {loss: min}") \
        .replace("  metric: val_acc\n", "")
    assert (search_of(text).metric, search_of(text).goal) == ("loss", "min")
    text = BASE.replace("  metric: val_acc\n", "  metric: loss\n  goal: max\n")
    assert (search_of(text).metric, search_of(text).goal) == ("loss", "max")
    text = BASE.replace("goal: {val_acc: max, loss: min}", "") \
        .replace("  metric: val_acc\n", "  metric: acc\n  goal: min\n")
    assert (search_of(text).metric, search_of(text).goal) == ("acc", "min")


def test_a_search_in_a_phase_is_named_after_it_and_counts_as_its_jobs() -> None:
    m = load("""
project: p
goal: {val_acc: max}
phases:
  - name: prep
    jobs: [{id: prep, cmd: prep}]
  - name: tune
    depends_on: prep
    search: {space: {lr: {low: 0.1, high: 0.9}}, trials: 2}
    template: {cmd: "train --lr ${lr} --out o/${trial}"}
""")
    assert [j.id for j in m.jobs] == ["prep"]
    search = m.phases[1].search
    assert search is not None and search.trial_job.phase == "tune"
    jobs = trial_jobs(search, 4, {"lr": "0.5"})
    assert [(j.id, j.cmd, j.phase) for j in jobs] == [("tune-t4", "train --lr 0.5 --out o/4",
                                                      "tune")]


def test_trial_jobs_put_each_value_in_every_field_and_quote_it_in_commands() -> None:
    text = BASE.replace("width: [64, 128, 256]", "width: [64, 'a b']")
    jobs = trial_jobs(search_of(text), 7, {"lr": "0.01", "width": "a b", "dropout": "0.25",
                                            "layers": "4"})
    assert [j.id for j in jobs] == ["t7_seed1", "t7_seed2"]
    assert jobs[1].cmd == "train --lr 0.01 --width 'a b' --dropout 0.25 --layers 4 --seed 2"
    assert jobs[0].metrics is not None and jobs[0].metrics.json == "out/7/m.json"
    assert dict(jobs[1].params) == {"lr": "0.01", "width": "a b", "dropout": "0.25",
                                    "layers": "4", "seed": "2", "trial": "7"}
    assert jobs[0].family == "main/template"
    with pytest.raises(ValueError, match="no value for layers"):
        trial_jobs(search_of(BASE), 0, {"lr": "1", "width": "64", "dropout": "0"})


def test_values_are_written_as_their_kind() -> None:
    assert value_text(SearchParam("n", 2, 8, integer=True), 4.0) == "4"
    assert value_text(SearchParam("lr", 0, 1), 0.25) == "0.25"
    assert value_text(SearchParam("w", choices=("64", "x")), "x") == "x"
    with pytest.raises(ValueError):
        value_text(SearchParam("lr", 0, 1), float("nan"))


@pytest.mark.parametrize(("old", "new", "key_path", "words"), [
    ("lr: {low: 1.0e-4, high: 1.0, log: true}", "lr: {low: 1.0, high: 1.0}",
     "search.space.lr", "empty range"),
    ("lr: {low: 1.0e-4, high: 1.0, log: true}", "lr: {low: 2, high: 1}",
     "search.space.lr", "empty range"),
    ("lr: {low: 1.0e-4, high: 1.0, log: true}", "lr: {low: 0.0, high: 1.0, log: true}",
     "search.space.lr.low", "log range must stay above 0"),
    ("lr: {low: 1.0e-4, high: 1.0, log: true}", "lr: {low: -1.0, high: 1.0, log: true}",
     "search.space.lr.low", "log range must stay above 0"),
    ("step: 0.05", "step: 0.3", "search.space.dropout.step", "does not divide"),
    ("step: 0.05", "step: 0", "search.space.dropout.step", "greater than 0"),
    ("lr: {low: 1.0e-4, high: 1.0, log: true}", "lr: {low: 1.0e-4, high: 1.0, log: true, "
     "step: 0.1}", "search.space.lr.step", "'log' or 'step'"),
    ("lr: {low: 1.0e-4, high: 1.0, log: true}", "lr: {high: 1.0}", "search.space.lr",
     "needs 'low'"),
    ("lr: {low: 1.0e-4, high: 1.0, log: true}", "lr: {low: 0.1, hgih: 1.0}",
     "search.space.lr.hgih", "unknown key"),
    ("lr: {low: 1.0e-4, high: 1.0, log: true}", "lr: 0.1", "search.space.lr",
     "a range {low, high"),
    ("width: [64, 128, 256]", "width: []", "search.space.width", "no choices"),
    ("width: [64, 128, 256]", "width: [64, 64]", "search.space.width[1]", "twice"),
    ("width: [64, 128, 256]", "trial: [1, 2]", "search.space.trial", "filled by eq-tui"),
    ("width: [64, 128, 256]", "GPU: [1, 2]", "search.space.GPU", "filled by eq-tui"),
    ("width: [64, 128, 256]", "width: [64, 128, 256]\n    depth: [1, 2]", "search.space.depth",
     "used by no command of the template"),
    ("grid: {seed: [1, 2]}", "grid: {seed: [1, 2], wd: [0, 1]}", "grid.wd",
     "used by no command"),
    ("grid: {seed: [1, 2]}", "grid: {seed: [1, 2], lr: [0, 1]}", "grid.lr",
     "both a grid variable and a name of the search"),
    ("  metric: val_acc\n", "", "search", "names 2 metrics"),
    ("goal: {val_acc: max, loss: min}", "", "search", "no direction for 'val_acc'"),
    ("  trials: 6\n  budget: {gpu_hours: 1.5}\n", "", "search", "'trials' or a 'budget'"),
    ("width: [64, 128, 256]", "depth: [1, 2]", "template.cmd",
     "undefined variable ${width} (a search trial); defined: depth,"),
    ("trials: 6", "trials: 0", "search.trials", "at least 1"),
    ("budget: {gpu_hours: 1.5}", "budget: {gpu_hours: 0}", "search.budget.gpu_hours",
     "greater than 0"),
    ("budget: {gpu_hours: 1.5}", "budget: {}", "search.budget", "needs 'gpu_hours'"),
    ("sampler: random", "sampler: tpee", "search.sampler", "did you mean 'tpe'"),
    ("seed: 3", "seed: -1", "search.seed", "at least 0"),
    ("  trials: 6", "  trails: 6", "search.trails", "did you mean 'trials'"),
    ("  cmd: \"train", "  id: x\n  cmd: \"train", "template.id", "names its trials itself"),
])
def test_each_mistake_names_its_key_path(old: str, new: str, key_path: str,
                                         words: str) -> None:
    assert old in BASE
    exc = error(BASE.replace(old, new, 1))
    assert exc.key_path == key_path, str(exc)
    assert words in str(exc)


def test_no_metric_at_all_and_no_template_are_refused() -> None:
    text = BASE.replace("goal: {val_acc: max, loss: min}", "").replace("  metric: val_acc\n", "")
    exc = error(text)
    assert exc.key_path == "search" and "needs a metric to optimise" in str(exc)
    start = BASE.index("template:")
    exc = error(BASE[:start])
    assert exc.key_path == "search" and "needs a 'template'" in str(exc)
    exc = error(BASE.replace("  space:\n", "  spaces:\n", 1).replace("    lr:", "  x:\n    lr:"))
    assert exc.key_path.startswith("search")


def test_a_search_at_the_top_level_beside_phases_is_refused() -> None:
    exc = error("""
project: p
goal: {a: max}
search: {space: {lr: [1, 2]}, trials: 2}
phases:
  - {name: x, jobs: [{id: j, cmd: c}]}
""")
    assert exc.key_path == "search" and "move it into a phase" in str(exc)


def test_without_optuna_it_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # sys.modules holding None is how Python marks a module that cannot be imported
    monkeypatch.setitem(sys.modules, "optuna", None)
    exc = error(BASE)
    assert exc.key_path == "search"
    assert "pip install 'eq-tui[search]'" in str(exc)


def test_a_sampler_whose_packages_are_missing_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cmaes", None)
    exc = error(BASE.replace("sampler: random", "sampler: cmaes"))
    assert exc.key_path == "search.sampler" and "pip install cmaes" in str(exc)


def test_dry_run_says_what_the_search_will_ask() -> None:
    assert describe_search(search_of(BASE)) == (
        "main: 6 trials or at most 1.5 GPU-hours (random, seed 3), 2 jobs each, max val_acc "
        "over lr, width, dropout, layers")
    text = BASE.replace("  trials: 6\n", "").replace("  seed: 3\n", "") \
        .replace("grid: {seed: [1, 2]}", "").replace(" --seed ${seed}", "")
    assert describe_search(search_of(text)) == (
        "main: at most 1.5 GPU-hours (random), 1 job each, max val_acc over lr, width, "
        "dropout, layers")
