"""`metrics:` naming the stacks' own files: `hf_state` (a path or glob) and `tensorboard` (a file
or directory), expanded on the host, so checked: never `..`, no shell metacharacters."""

from __future__ import annotations

import textwrap

import pytest

from eq_tui.errors import ManifestError
from eq_tui.manifest import load_manifest_text
from eq_tui.manifest.model import Manifest, MetricsSpec


def load(text: str) -> Manifest:
    return load_manifest_text(textwrap.dedent(text), "m.yaml")


def test_hf_state_and_tensorboard_take_variables_and_globs() -> None:
    m = load("""
        project: p
        metrics: {hf_state: "out/${lr}/checkpoint-*/trainer_state.json",
                  tensorboard: "~/tb runs/${JOB_ID}"}
        grid: {lr: [0.1]}
        template: {cmd: "train --lr ${lr}"}
        """)
    assert m.jobs[0].metrics == MetricsSpec(hf_state="out/0.1/checkpoint-*/trainer_state.json",
                                            tensorboard="~/tb runs/${JOB_ID}")
    assert m.jobs[0].metrics.files() == ("out/0.1/checkpoint-*/trainer_state.json",
                                         "~/tb runs/${JOB_ID}")


@pytest.mark.parametrize(("value", "says"), [
    ("../other/trainer_state.json", "'..' is not allowed"),
    ("out/../../x", "'..' is not allowed"),
    ("out/$(rm -rf ~)/trainer_state.json", "'$' is not allowed"),
    ("out;ls", "';' is not allowed"),
    ("out/`id`", "'`' is not allowed"),
    ("out/{a,b}", "'{' is not allowed"),
])
def test_a_bad_pattern_is_refused_at_its_key(value: str, says: str) -> None:
    with pytest.raises(ManifestError) as info:
        load(f"""
            project: p
            jobs:
              - {{id: a, cmd: x, metrics: {{hf_state: {value!r}}}}}
            """)
    assert says in str(info.value) and "metrics.hf_state" in str(info.value)


def test_a_grid_value_is_checked_once_filled_in() -> None:
    with pytest.raises(ManifestError) as info:
        load("""
            project: p
            metrics: {tensorboard: "runs/${name}"}
            grid: {name: ["a|b"]}
            template: {id: j, cmd: "train"}
            """)
    assert "'|' is not allowed" in str(info.value) and "metrics.tensorboard" in str(info.value)


def test_metrics_naming_no_file_still_needs_a_source() -> None:
    with pytest.raises(ManifestError, match="hf_state, tensorboard"):
        load("""
            project: p
            metrics: {}
            jobs: [{id: a, cmd: x}]
            """)
