"""What a job added at run time (`eq-tui add --phase P`) takes from its phase
(manifest/added_jobs.py), read from manifests by the real loader: every per-job key a job
written there would have, except a text that names a grid variable (an added job has no grid
point): that key is left out and named with its variable. A `metrics:` naming a grid variable
in any of its file paths is left out whole (half a spec would read the wrong files);
launch-time variables (`${JOB_ID}`, `${ATTEMPT}`) stay for the launch to fill, and `$$` is a
literal `$`, as for the jobs written in the phase."""

from __future__ import annotations

import textwrap

import pytest

from eq_tui.manifest import load_manifest_text
from eq_tui.manifest.model import AddedJobDefaults, MetricsSpec, Precondition


def added(text: str, phase: str = "train") -> AddedJobDefaults:
    manifest = load_manifest_text(textwrap.dedent(text), "m.yaml")
    return manifest.phase(phase).added_jobs


def in_phase(keys: str) -> AddedJobDefaults:
    """A phase with a grid over `lr` and these keys of its own."""
    return added("project: p\nphases:\n  - name: train\n    grid: {lr: [0.1, 0.3]}\n"
                 "    template: {cmd: \"train --lr ${lr}\"}\n"
                 + textwrap.indent(textwrap.dedent(keys), "    "))


@pytest.mark.parametrize("key", ["json", "jsonl", "csv", "hf_state", "tensorboard"])
def test_a_metrics_file_that_names_a_grid_variable_leaves_metrics_out(key: str) -> None:
    defaults = in_phase(f"metrics: {{log: true, {key}: \"out/${{lr}}/m\"}}\n")
    assert defaults.metrics is None
    assert defaults.left_out == (f"metrics.{key} (uses ${{lr}})",)


def test_one_file_of_several_naming_a_grid_variable_leaves_the_whole_spec_out() -> None:
    """Half a spec would read the wrong files: json read, jsonl (the run's series) not."""
    defaults = in_phase("metrics: {json: \"final.json\", jsonl: \"runs/${lr}/log.jsonl\", "
                        "csv: \"m.csv\"}\n")
    assert defaults.metrics is None
    assert defaults.left_out == ("metrics.jsonl (uses ${lr})",)
    last = in_phase("metrics: {json: \"final.json\", tensorboard: \"tb/${lr}\"}\n")
    assert last.metrics is None and last.left_out == ("metrics.tensorboard (uses ${lr})",)


def test_metrics_without_grid_variables_are_inherited_with_launch_time_ones_kept() -> None:
    defaults = in_phase("metrics:\n"
                        "  json: \"out/${JOB_ID}/final.json\"\n"
                        "  jsonl: \"cost$$/${ATTEMPT}.jsonl\"\n"
                        "  csv: \"logs/metrics.csv\"\n"
                        "  hf_state: \"out/${JOB_ID}/checkpoint-*/trainer_state.json\"\n"
                        "  tensorboard: \"tb/${JOB_ID}\"\n"
                        "  pattern: \"acc=(?P<acc>[0-9.]+)\"\n")
    assert defaults.metrics == MetricsSpec(
        json="out/${JOB_ID}/final.json", jsonl="cost$/${ATTEMPT}.jsonl",
        csv="logs/metrics.csv", hf_state="out/${JOB_ID}/checkpoint-*/trainer_state.json",
        tensorboard="tb/${JOB_ID}", log=True, pattern="acc=(?P<acc>[0-9.]+)")
    assert defaults.left_out == ()
    # the same metrics as a job written in the phase reads them
    manifest = load_manifest_text(
        "project: p\nphases:\n  - name: train\n    grid: {lr: [0.1]}\n"
        "    template: {cmd: \"train --lr ${lr}\"}\n"
        "    metrics: {jsonl: \"cost$$/${ATTEMPT}.jsonl\", hf_state: \"o/${JOB_ID}/s.json\"}\n",
        "m.yaml")
    assert manifest.phase("train").added_jobs.metrics == manifest.jobs[0].metrics


def test_a_metrics_spec_with_no_file_is_inherited_as_it_is() -> None:
    assert in_phase("metrics: {log: true}\n").metrics == MetricsSpec(log=True)
    assert in_phase("metrics: {pattern: \"loss (?P<loss>\\\\S+)\"}\n").metrics == MetricsSpec(
        log=True, pattern="loss (?P<loss>\\S+)")
    assert in_phase("").metrics is None


def test_output_check_and_preconditions_naming_a_grid_variable_are_left_out_each() -> None:
    defaults = in_phase("output_check: \"out/${lr}.done\"\n"
                        "preconditions:\n"
                        "  - {type: checkpoint_exists, path: \"data/train.bin\"}\n"
                        "  - {type: checkpoint_exists, path: \"data/${lr}.bin\"}\n"
                        "  - {type: checkpoint_exists, path: \"ckpt/$${HOME}\"}\n"
                        "metrics: {json: \"out/${lr}.json\"}\n")
    assert defaults.output_check is None
    assert defaults.preconditions == (Precondition("checkpoint_exists", "data/train.bin"),
                                      Precondition("checkpoint_exists", "ckpt/${HOME}"))
    assert defaults.left_out == ("output_check (uses ${lr})", "preconditions[1] (uses ${lr})",
                                 "metrics.json (uses ${lr})")
    kept = in_phase("output_check: \"out/${JOB_ID}.done\"\n")
    assert kept.output_check == "out/${JOB_ID}.done" and kept.left_out == ()


def test_the_phases_other_keys_and_the_top_levels_are_inherited() -> None:
    defaults = added("""
        project: p
        stall_after: 10m
        metrics: {jsonl: "top/${lr}.jsonl"}
        phases:
          - name: train
            grid: {lr: [0.1]}
            template: {cmd: "train --lr ${lr}"}
            on_stall: restart
            gpus_per_job: 2
            mem_mib: 9000
            priority: 3
            preempt: force
            max_preemptions: 1
            retry_lost: 0
        """)
    assert defaults == AddedJobDefaults(stall_after=600.0, on_stall="restart", gpus_per_job=2,
                                        mem_mib=9000, exclusive=False, priority=3,
                                        preempt="force", max_preemptions=1, retry_lost=0,
                                        left_out=("metrics.jsonl (uses ${lr})",))
    top = added("""
        project: p
        grid: {lr: [0.1]}
        template: {cmd: "train --lr ${lr}"}
        exclusive: true
        mem_mib: auto
        """, phase="main")
    assert (top.mem_mib, top.exclusive, top.gpus_per_job) == ("auto", True, 1)
