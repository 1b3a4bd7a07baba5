"""The results keys of the manifest: metrics, goal, group_over, on_complete."""

from __future__ import annotations

import textwrap

import pytest

from eq_tui.errors import ManifestError
from eq_tui.manifest import load_manifest_text
from eq_tui.manifest.model import Manifest, MetricsSpec


def load(text: str) -> Manifest:
    return load_manifest_text(textwrap.dedent(text), "m.yaml")


def test_metrics_at_every_level_with_variables() -> None:
    m = load("""
        project: p
        metrics: {log: true}
        goal: {val_acc: max}
        on_complete: python analyse.py
        phases:
          - name: train
            metrics: {jsonl: "out/${JOB_ID}/${lr}.jsonl"}
            goal: {loss: min}
            group_over: rep
            on_complete: python plot.py
            grid: {lr: [0.1, 0.01], rep: [1, 2]}
            template:
              cmd: train --lr ${lr}
          - name: eval
            jobs:
              - {id: e1, cmd: ev 1}
              - id: e2
                cmd: ev 2
                metrics: {csv: "${RUN_DIR}/e2.csv", pattern: "acc (?P<acc>\\\\S+)"}
        """)
    train = m.jobs[0]
    assert train.metrics == MetricsSpec(jsonl="out/${JOB_ID}/0.1.jsonl")
    assert train.params == (("lr", "0.1"), ("rep", "1"))
    e1, e2 = m.jobs[4], m.jobs[5]
    assert e1.metrics == MetricsSpec(log=True) and e1.params == ()
    assert e2.metrics == MetricsSpec(csv="${RUN_DIR}/e2.csv", log=True, pattern=r"acc (?P<acc>\S+)")
    phase = m.phase("train").results
    assert dict(phase.goal) == {"val_acc": "max", "loss": "min"}
    assert phase.group_over == "rep" and phase.on_complete == "python plot.py"
    assert m.phase("eval").results.on_complete is None  # the top level's runs at the end
    assert m.results.on_complete == "python analyse.py" and m.results.group_over == "seed"


def test_without_phases_the_top_level_hook_runs_once() -> None:
    m = load("""
        project: p
        on_complete: echo done
        jobs: [{id: a, cmd: x}]
        """)
    assert m.results.on_complete == "echo done"
    assert m.phases[0].results.on_complete is None
    assert m.jobs[0].metrics is None


@pytest.mark.parametrize(("text", "message", "key_path"), [
    ("metrics: {json: 3}", "expected a string", "metrics.json"),
    ("metrics: {yaml: a.yaml}", "unknown key 'yaml'", "metrics.yaml"),
    ("metrics: {}", "name at least one source", "metrics"),
    ("metrics: {pattern: '('}", "not a valid regular expression", "metrics.pattern"),
    ("metrics: {pattern: 'acc=[0-9]+'}", "needs named groups", "metrics.pattern"),
    ("metrics: {log: yes please}", "expected true or false", "metrics.log"),
    ("goal: {val_acc: up}", "must be one of max, min", "goal.val_acc"),
    ("goal: [val_acc]", "expected a mapping", "goal"),
    ("group_over: 'a b'", "may only use", "group_over"),
    ("on_complete: ''", "needs a command", "on_complete"),
])
def test_bad_results_keys_name_the_key(text: str, message: str, key_path: str) -> None:
    with pytest.raises(ManifestError) as info:
        load(f"project: p\n{text}\njobs: [{{id: a, cmd: x}}]\n")
    assert message in str(info.value)
    assert info.value.key_path == key_path and info.value.line == 2


def test_a_job_metrics_key_is_checked_where_written() -> None:
    with pytest.raises(ManifestError) as info:
        load("""
            project: p
            jobs:
              - {id: a, cmd: x, metrics: {jsonl: ""}}
            """)
    assert info.value.key_path == "jobs[0].metrics.jsonl"
