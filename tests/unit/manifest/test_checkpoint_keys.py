"""The `checkpoint:` key (manifest/checkpoint_keys.py) at the top level, in a phase and on a job
(the nearest wins), rendered per job with its variables and `${id}`; each mistake named with its
key path and line, as `--dry-run` shows it."""

from __future__ import annotations

import pytest

from eq_tui.errors import ManifestError
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import CheckpointSpec


def load(text: str):  # type: ignore[no-untyped-def]
    return load_manifest_text(text, "m.yaml")


def test_the_nearest_contract_wins_rendered_for_each_job() -> None:
    m = load("""
project: p
checkpoint: {path: "ckpt/${id}/*.pt", resume: "--resume {checkpoint}"}
phases:
  - name: a
    grid: {lr: ["0.1", "0.3"]}
    template: {cmd: "train --lr ${lr}"}
  - name: b
    checkpoint:
      path: "runs/${JOB_ID}/last-*.ckpt"
      resume: "--ckpt_path {checkpoint} --tag ${tag}"
    args: {tag: "x y"}
    jobs:
      - {id: b1, cmd: t1}
      - {id: b2, cmd: t2, checkpoint: {path: "own/e[0-9]*.pt", resume: "-r {checkpoint}"}}
  - name: c
    jobs: [{id: c1, cmd: t}]
""")
    specs = m.job_specs
    assert specs["lr0.1"].checkpoint == CheckpointSpec("ckpt/lr0.1/*.pt", "--resume {checkpoint}")
    assert specs["lr0.3"].checkpoint == CheckpointSpec("ckpt/lr0.3/*.pt", "--resume {checkpoint}")
    # a value in resume is quoted like the command's; ${JOB_ID} in the path is the job's id
    assert specs["b1"].checkpoint == CheckpointSpec("runs/b1/last-*.ckpt",
                                                    "--ckpt_path {checkpoint} --tag 'x y'")
    assert specs["b2"].checkpoint == CheckpointSpec("own/e[0-9]*.pt", "-r {checkpoint}")
    assert specs["c1"].checkpoint == CheckpointSpec("ckpt/c1/*.pt", "--resume {checkpoint}")
    assert load("project: p\njobs: [{id: j, cmd: x}]\n").job_specs["j"].checkpoint is None


@pytest.mark.parametrize(("contract", "message"), [
    ('{path: "ckpt/*.pt", resume: "--resume"}',
     "checkpoint.resume: must say where the checkpoint's path goes with {checkpoint}"),
    ('{path: "ckpt/*.pt"}', "checkpoint: needs 'resume'"),
    ('{resume: "-r {checkpoint}"}', "checkpoint: needs 'path'"),
    ('{path: "ckpt/*.pt", resume: "-r {checkpoint}", every: 1}',
     "checkpoint.every: unknown key 'every'"),
    ('{path: "../elsewhere/*.pt", resume: "-r {checkpoint}"}',
     "checkpoint.path: job 'j': checkpoint path '../elsewhere/*.pt' may not leave"),
    ('{path: "ckpt/../../*.pt", resume: "-r {checkpoint}"}', "may not leave the job's"),
    ('{path: "/abs/ckpt/*.pt", resume: "-r {checkpoint}"}', "must be relative to the job's"),
    ('{path: "~/ckpt/*.pt", resume: "-r {checkpoint}"}', "must be relative to the job's"),
    ('{path: "ckpt/$(reboot)/*.pt", resume: "-r {checkpoint}"}', "holds '$()'"),
    ('{path: "ckpt/a;b.pt", resume: "-r {checkpoint}"}', "holds ';'"),
    ('{path: "ckpt/${nope}/*.pt", resume: "-r {checkpoint}"}',
     "checkpoint.path: undefined variable ${nope}"),
    ('{path: "ckpt/*.pt", resume: "-r {checkpoint} ${nope}"}',
     "checkpoint.resume: undefined variable ${nope}"),
    ('"ckpt/*.pt"', "checkpoint: expected a mapping"),
])
def test_a_bad_contract_is_named_with_its_key_path_and_line(contract: str,
                                                            message: str) -> None:
    with pytest.raises(ManifestError) as info:
        load(f"project: p\ncheckpoint: {contract}\njobs: [{{id: j, cmd: x}}]\n")
    assert message in str(info.value), str(info.value)
    assert "m.yaml:2:" in str(info.value)


def test_a_grid_value_that_is_no_safe_path_is_named_with_its_job() -> None:
    with pytest.raises(ManifestError) as info:
        load('project: p\ngrid: {name: ["a b"]}\ntemplate: {id: "j1", cmd: "t"}\n'
             'checkpoint: {path: "ckpt/${name}/*.pt", resume: "-r {checkpoint}"}\n')
    assert "job 'j1'" in str(info.value) and "holds ' '" in str(info.value), str(info.value)
