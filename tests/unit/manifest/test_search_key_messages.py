"""What a user reads for each mistake in a `search:` (manifest/search_keys.py): the key path,
the line and the words of every message, and the edges of each rule (a range's bounds and
step, the integer ranges, the samplers' packages), through the loader as `--dry-run` runs it."""

from __future__ import annotations

import sys
import types
from importlib.machinery import ModuleSpec

import pytest

from eq_tui.manifest.model import CheckpointSpec, SearchParam
from eq_tui.manifest.search_trials import trial_jobs
from tests.unit.manifest.test_search_keys import BASE, error, load, search_of

SMALL = """\
project: p
goal: {acc: max}
search:
  space: {lr: {low: 0.1, high: 0.9}}
  trials: 2
template: {cmd: "train --lr ${lr}"}
"""


def small(old: str, new: str) -> str:
    assert old in SMALL, old
    return SMALL.replace(old, new, 1)


def space(entry: str) -> str:
    return small("{lr: {low: 0.1, high: 0.9}}", f"{{{entry}}}").replace("${lr}", "${x}")


@pytest.mark.parametrize(("text", "key_path", "line", "message"), [
    (small("search:\n  space: {lr: {low: 0.1, high: 0.9}}\n  trials: 2\n", "search: 5\n"),
     "search", 3, "expected a mapping, got an integer (5)"),
    (small("  space: {lr: {low: 0.1, high: 0.9}}\n", ""), "search", 3,
     "a search needs a 'space': the names Optuna chooses and their ranges"),
    (small("{lr: {low: 0.1, high: 0.9}}", "[lr]"), "search.space", 4,
     "expected a mapping, got a list"),
    (small("{lr: {low: 0.1, high: 0.9}}", "{}"), "search.space", 4,
     "the search space is empty"),
    (space("1: [a, b]"), "search.space.1", 4, "search name 1 must be a name like lr or width"),
    (space("bad-x: [a, b]"), "search.space.bad-x", 4,
     "search name 'bad-x' must be a name like lr or width"),
    (space("trial: [a, b]"), "search.space.trial", 4,
     "${trial} is filled by eq-tui; pick another name"),
    (space("x: 5"), "search.space.x", 4,
     "expected a range {low, high, log?, step?} or a list of choices"),
    (space("x: []"), "search.space.x", 4, "'x' has no choices"),
    (space("x: [a, [1]]"), "search.space.x[1]", 4,
     "choices must be strings, numbers or booleans"),
    (space("x: [a, b, a]"), "search.space.x[2]", 4, "choice 'a' is listed twice"),
    (space("x: {low: 1, high: 2, zz: 3}"), "search.space.x.zz", 4,
     "unknown key 'zz'; known keys: high, log, low, step"),
    (space("x: {low: 1}"), "search.space.x", 4, "a range needs 'high'"),
    (space("x: {high: 1}"), "search.space.x", 4, "a range needs 'low'"),
    (space("x: {low: a, high: 2}"), "search.space.x.low", 4,
     "expected a number, got a string ('a')"),
    (space("x: {low: 1, high: a}"), "search.space.x.high", 4,
     "expected a number, got a string ('a')"),
    (space("x: {low: 2, high: 2}"), "search.space.x", 4,
     "empty range: low (2) must be below high (2)"),
    (space("x: {low: 1, high: 2, log: 1}"), "search.space.x.log", 4,
     "expected true or false, got an integer (1)"),
    (space("x: {low: 0, high: 2, log: true}"), "search.space.x.low", 4,
     "a log range must stay above 0, got low 0"),
    (space("x: {low: 1, high: 2, log: true, step: 0.5}"), "search.space.x.step", 4,
     "a range takes 'log' or 'step', not both"),
    (space("x: {low: 1, high: 2, step: 0.3}"), "search.space.x.step", 4,
     "step 0.3 does not divide the range 1..2"),
    # one step of 1 short by 1.5e-9: more than rounding (1e-9 of a step)
    (space("x: {low: 0, high: 1.0000000015, step: 1}"), "search.space.x.step", 4,
     "step 1 does not divide the range 0..1"),
    # a step wider than the range: one value, however close the count is to 0
    (space("x: {low: 0, high: 1.0e-9, step: 1}"), "search.space.x.step", 4,
     "step 1 does not divide the range 0..1e-09"),
    (space("x: {low: 0, high: 1.0e-12, step: 1}"), "search.space.x.step", 4,
     "step 1 does not divide the range 0..1e-12"),
    (small("  trials: 2\n", ""), "search", 3,
     "a search needs 'trials' or a 'budget' (or both): when to stop asking"),
    (small("  trials: 2\n", "  budget: 5\n"), "search.budget", 5,
     "expected a mapping, got an integer (5)"),
    (small("  trials: 2\n", "  budget: {gpu_hour: 1}\n"), "search.budget.gpu_hour", 5,
     "unknown key 'gpu_hour'; did you mean 'gpu_hours'?"),
    (small("  trials: 2\n", "  budget: {gpu_hours: null}\n"), "search.budget", 5,
     "a budget needs 'gpu_hours'"),
    (small("  trials: 2\n", "  trials: 2\n  metric: 5\n"), "search.metric", 6,
     "expected a string, got an integer (5)"),
    (small("  trials: 2\n", "  trials: 2\n  goal: up\n"), "search.goal", 6,
     "must be one of max, min, got 'up'"),
    (small("goal: {acc: max}", "goal: {acc: max, loss: min, f1: max}"), "search", 3,
     "the goal names 3 metrics (acc, loss, f1); say which one the search optimises with "
     "search.metric"),
    (small("goal: {acc: max}\n", ""), "search", 2,
     "a search needs a metric to optimise: give a 'goal' ({val_acc: max}) or search.metric "
     "and search.goal"),
    (small("template: {cmd: \"train --lr ${lr}\"}\n", ""), "search", 3,
     "a search needs a 'template': the job each trial runs"),
    (small("template: {cmd: \"train --lr ${lr}\"}", "template: [a]"), "template", 6,
     "expected a mapping, got a list"),
    (small("{cmd:", "{id: x, cmd:"), "template.id", 6,
     "a search names its trials itself (t0, t1, ...): leave out 'id'"),
    (small("${lr}", "1"), "search.space.lr", 4,
     "search name 'lr' is used by no command of the template: every trial would run the "
     "same; write ${lr} in it"),
    (small("template:", "grid: {seed: [1, 2]}\ntemplate:"), "grid.seed", 6,
     "grid variable 'seed' is used by no command of the template"),
    (small("template:", "grid: {trial: [1, 2]}\ntemplate:"), "grid.trial", 6,
     "'trial' is both a grid variable and a name of the search"),
    (small("template:", "grid: {lr: [1, 2]}\ntemplate:"), "grid.lr", 6,
     "'lr' is both a grid variable and a name of the search"),
    (small("template:", "grid: {seed: []}\ntemplate:"), "grid.seed", 6,
     "grid variable 'seed' has no values"),
    (small("  trials: 2\n", "  trials: 2\n  sampler: grid\n"), "search.sampler", 6,
     "must be one of tpe, gp, cmaes, random, qmc, got 'grid'"),
    # what the template says wrong is said of "a search trial", in the names written
    (small("${lr}", "${lr} ${nope}"), "template.cmd", 6,
     "undefined variable ${nope} (a search trial); defined: lr, trial; launch-time:"),
    (small("template:", "checkpoint: {path: \"c/${id}/ ${lr}\", resume: \"-r {checkpoint}\"}"
           "\ntemplate:"), "checkpoint.path", 6,
     "job 't${trial}': checkpoint path 'c/t${trial}/ ${lr}' holds ' ': only letters"),
    (small("{cmd: \"train --lr ${lr}\"}", "{cmd: \"\"}"), "template.cmd", 6,
     "job 't${trial}' has an empty command"),
])
def test_each_mistake_reads_as_written_at_its_key_path_and_line(text: str, key_path: str,
                                                               line: int, message: str) -> None:
    exc = error(text)
    assert (exc.key_path, exc.line, exc.path) == (key_path, line, "m.yaml"), str(exc)
    assert exc.message.startswith(message), str(exc)
    assert "@@" not in str(exc) and "eqs" not in str(exc), str(exc)


def test_in_a_phase_each_key_path_starts_at_the_phase() -> None:
    text = """\
project: p
goal: {acc: max}
phases:
  - name: prep
    jobs: [{id: prep, cmd: prep}]
  - name: tune
    search: {space: {lr: {low: 0.1, high: 0.9}, w: [1, 2]}, trials: 2}
    template: {cmd: "train --lr ${lr}"}
"""
    exc = error(text)
    assert (exc.key_path, exc.line) == ("phases[1].search.space.w", 7), str(exc)
    exc = error(text.replace("w: [1, 2]", "w: []"))
    assert exc.key_path == "phases[1].search.space.w", str(exc)
    exc = error(text.replace(", w: [1, 2]", "").replace('"train --lr ${lr}"', '""'))
    assert exc.key_path == "phases[1].template.cmd", str(exc)
    assert exc.message == "job 'tune-t${trial}' has an empty command", str(exc)


def test_a_job_deliberately_named_as_the_trials_stand_in_is_a_duplicate() -> None:
    exc = error(small("search:", "jobs: [{id: eqs-trial.main, cmd: x}]\nsearch:"))
    assert (exc.key_path, exc.line) == ("template", 7), str(exc)
    assert exc.message == ("duplicate job id 't${trial}': made by the search of template "
                           "(line 7) and by jobs[0] (line 3)"), str(exc)


def test_each_trial_saves_its_checkpoints_under_its_own_id() -> None:
    """${id} and ${JOB_ID} in a checkpoint contract are the trial job's id: trials never
    resume from one another's checkpoints."""
    text = small("template:", 'checkpoint: {path: "c/${id}/*.pt", resume: '
                              '"-r {checkpoint} --tag ${JOB_ID}"}\ngrid: {seed: [1, 2]}\n'
                              "template:").replace("${lr}", "${lr} --seed ${seed}")
    jobs = [*trial_jobs(search_of(text), 3, {"lr": "0.5"}),
            *trial_jobs(search_of(text), 4, {"lr": "0.5"})]
    assert [(j.id, j.checkpoint) for j in jobs] == [
        (f"t{n}_seed{s}", CheckpointSpec(f"c/t{n}_seed{s}/*.pt",
                                         f"-r {{checkpoint}} --tag t{n}_seed{s}"))
        for n in (3, 4) for s in (1, 2)]
    # a job of the manifest named like the old stand-in is no duplicate
    assert load(small("search:", "jobs: [{id: search-main, cmd: x}]\nsearch:")).jobs[0].id \
        == "search-main"


def test_range_edges_and_which_ranges_are_integers() -> None:
    def param(entry: str) -> SearchParam:
        return search_of(space(entry)).space[0]

    assert param("x: {low: 2, high: 8}") == SearchParam("x", 2, 8, integer=True)
    assert param("x: {low: 2, high: 8.0}") == SearchParam("x", 2, 8)
    assert param("x: {low: 2, high: 8, step: 0.5}") == SearchParam("x", 2, 8, step=0.5)
    assert param("x: {low: 1, high: 4, step: 3}") == SearchParam("x", 1, 4, step=3,
                                                                  integer=True)
    assert param("x: {low: 1, high: 2, log: false}") == SearchParam("x", 1, 2, integer=True)
    assert param("x: {low: 0, high: 2, log: null}") == SearchParam("x", 0, 2, integer=True)
    assert param("x: {low: 0.001, high: 2, log: true}") == SearchParam("x", 0.001, 2, log=True)
    assert param("x: {low: -1, high: 2}") == SearchParam("x", -1, 2, integer=True)
    # 100002 steps of 0.1: off only by float rounding, so it divides
    assert param("x: {low: 0.1, high: 10000.3, step: 0.1}").step == 0.1
    assert param("x: {low: 0.1, high: 0.7, step: 0.1}").step == 0.1


def test_choices_are_kept_as_written() -> None:
    choices = search_of(space("x: [a, 0.10, 1.0e-3, true, 7]")).space[0].choices
    assert choices == ("a", "0.10", "1.0e-3", "true", "7")


def test_amounts_defaults_and_the_sampler() -> None:
    spec = search_of(SMALL)
    assert (spec.trials, spec.gpu_hours, spec.sampler, spec.seed, spec.grid) == \
        (2, None, "tpe", None, ())
    spec = search_of(small("  trials: 2\n", "  budget: {gpu_hours: 0.5}\n  seed: 0\n"))
    assert (spec.trials, spec.gpu_hours, spec.seed) == (None, 0.5, 0)
    assert search_of(small("trials: 2", "trials: 1")).trials == 1


def _stand_in(monkeypatch: pytest.MonkeyPatch, name: str, *, spec: bool = True) -> None:
    module = types.ModuleType(name)
    module.__spec__ = ModuleSpec(name, None) if spec else None
    monkeypatch.setitem(sys.modules, name, module)


@pytest.mark.parametrize(("sampler", "present", "message"), [
    ("gp", (), "sampler 'gp' needs torch and scipy, not installed: pip install torch scipy"),
    ("gp", ("torch",), "sampler 'gp' needs scipy, not installed: pip install scipy"),
    ("qmc", (), "sampler 'qmc' needs scipy, not installed: pip install scipy"),
    ("cmaes", ("scipy", "torch"), "sampler 'cmaes' needs cmaes, not installed: pip install "
                                  "cmaes"),
])
def test_a_sampler_names_each_package_it_lacks(monkeypatch: pytest.MonkeyPatch, sampler: str,
                                               present: tuple[str, ...], message: str) -> None:
    for name in ("torch", "scipy", "cmaes"):
        if name in present:
            _stand_in(monkeypatch, name)
        else:
            monkeypatch.setitem(sys.modules, name, None)
    exc = error(small("  trials: 2\n", f"  trials: 2\n  sampler: {sampler}\n"))
    assert (exc.key_path, exc.message) == ("search.sampler", message), str(exc)


@pytest.mark.parametrize(("sampler", "needs"), [
    ("gp", ("torch", "scipy")), ("qmc", ("scipy",)), ("cmaes", ("cmaes",)),
    ("random", ()), ("tpe", ())])
def test_a_sampler_with_its_packages_is_taken(monkeypatch: pytest.MonkeyPatch, sampler: str,
                                              needs: tuple[str, ...]) -> None:
    for name in ("torch", "scipy", "cmaes"):
        if name in needs:
            _stand_in(monkeypatch, name)
        else:
            monkeypatch.setitem(sys.modules, name, None)
    assert search_of(small("  trials: 2\n", f"  trials: 2\n  sampler: {sampler}\n")).sampler \
        == sampler


def test_a_stand_in_without_a_spec_is_no_optuna(monkeypatch: pytest.MonkeyPatch) -> None:
    _stand_in(monkeypatch, "optuna", spec=False)
    exc = error(SMALL)
    assert (exc.key_path, exc.message) == (
        "search", "a search needs Optuna, which is not installed: pip install 'eq-tui[search]'")


def test_the_static_jobs_beside_a_search_and_its_base() -> None:
    m = load(small("search:", "jobs: [{id: j, cmd: x}]\nsearch:"))
    assert [j.id for j in m.jobs] == ["j"]
    assert load(BASE).phases[0].search is not None
