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


def error(text: str) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        load(text)
    assert info.value.exit_code == 2
    return info.value


def top(contract: str) -> str:
    return f"project: p\ncheckpoint: {contract}\njobs: [{{id: j, cmd: x}}]\n"


def contract_of(contract: str) -> CheckpointSpec | None:
    spec: CheckpointSpec | None = load(top(contract)).job_specs["j"].checkpoint
    return spec


@pytest.mark.parametrize(("contract", "key_path", "message"), [
    ('{path: "ckpt/*.pt"}', "checkpoint",
     "needs 'resume' (for example resume: '--resume {checkpoint}')"),
    ('{path: "ckpt/*.pt", resume: null}', "checkpoint",
     "needs 'resume' (for example resume: '--resume {checkpoint}')"),
    ('{resume: "-r {checkpoint}"}', "checkpoint",
     "needs 'path' (for example path: 'ckpt/${id}/*.pt')"),
    ('{path: null, resume: "-r {checkpoint}"}', "checkpoint",
     "needs 'path' (for example path: 'ckpt/${id}/*.pt')"),
    ('{path: 5, resume: "-r {checkpoint}"}', "checkpoint.path",
     "expected a string, got an integer (5)"),
    ('{path: "c/*.pt", resume: 5}', "checkpoint.resume",
     "expected a string, got an integer (5)"),
    ('{path: "c/*.pt", resume: "--resume"}', "checkpoint.resume",
     "must say where the checkpoint's path goes with {checkpoint}, e.g. "
     "'--resume {checkpoint}', got '--resume'"),
    ('{path: "c/*.pt", resume: "-r {checkpoint}", evry: 1}', "checkpoint.evry",
     "unknown key 'evry'; known keys: grace, path, resume, signal"),
    ('[]', "checkpoint", "expected a mapping, got a list"),
    # signal: a name a job can catch, whatever its case, blanks or SIG prefix
    ('{path: "c/*.pt", resume: "-r {checkpoint}", signal: NOPE}', "checkpoint.signal",
     "'NOPE' is not a signal a job can catch to save its checkpoint (for example TERM, "
     "USR1, USR2, INT)"),
    ('{path: "c/*.pt", resume: "-r {checkpoint}", signal: KILL}', "checkpoint.signal",
     "'KILL' is not a signal a job can catch to save its checkpoint (for example TERM, "
     "USR1, USR2, INT)"),
    ('{path: "c/*.pt", resume: "-r {checkpoint}", signal: sigkill}', "checkpoint.signal",
     "'sigkill' is not a signal"),
    ('{path: "c/*.pt", resume: "-r {checkpoint}", signal: STOP}', "checkpoint.signal",
     "'STOP' is not a signal"),
    # SIG_IGN is a handler of the signal module, not a signal
    ('{path: "c/*.pt", resume: "-r {checkpoint}", signal: SIG_IGN}', "checkpoint.signal",
     "'SIG_IGN' is not a signal"),
    ('{path: "c/*.pt", resume: "-r {checkpoint}", signal: 15}', "checkpoint.signal",
     "expected a string, got an integer (15)"),
    # grace: 0 to a day, in seconds
    ('{path: "c/*.pt", resume: "-r {checkpoint}", grace: -1}', "checkpoint.grace",
     "must be 0 to 86400 seconds, not -1"),
    ('{path: "c/*.pt", resume: "-r {checkpoint}", grace: -0.5}', "checkpoint.grace",
     "must be 0 to 86400 seconds, not -0.5"),
    ('{path: "c/*.pt", resume: "-r {checkpoint}", grace: 86400.5}', "checkpoint.grace",
     "must be 0 to 86400 seconds, not 86400.5"),
    ('{path: "c/*.pt", resume: "-r {checkpoint}", grace: true}', "checkpoint.grace",
     "must be 0 to 86400 seconds, not True"),
    ('{path: "c/*.pt", resume: "-r {checkpoint}", grace: "60"}', "checkpoint.grace",
     "must be 0 to 86400 seconds, not '60'"),
])
def test_each_mistake_says_what_is_wrong_at_its_key_path(contract: str, key_path: str,
                                                         message: str) -> None:
    exc = error(top(contract))
    assert exc.key_path == key_path, str(exc)
    assert exc.message.startswith(message), str(exc)
    assert exc.line == 2, str(exc)


def test_signal_and_grace_are_read_as_written_and_default_to_term_and_a_minute() -> None:
    base = '{path: "c/*.pt", resume: "-r {checkpoint}"%s}'
    spec = contract_of(base % "")
    assert spec is not None and (spec.signal, spec.grace) == ("TERM", 60.0)
    for written, name in (("USR1", "USR1"), ("' sigusr2 '", "USR2"), ("SIGINT", "INT"),
                          ("int", "INT"), ("TERM", "TERM"), ("SIGHUP", "HUP")):
        spec = contract_of(base % f", signal: {written}")
        assert spec is not None and spec.signal == name, written
    for written, grace in (("0", 0.0), ("86400", 86400.0), ("2.5", 2.5), ("7", 7.0),
                           ("null", 60.0)):
        spec = contract_of(base % f", grace: {written}")
        assert spec is not None and spec.grace == grace, written
        assert type(spec.grace) is float
    spec = contract_of(base % ", signal: null")
    assert spec is not None and spec.signal == "TERM"


def test_a_job_or_phase_without_its_own_contract_inherits_the_nearest() -> None:
    m = load("""
project: p
checkpoint: {path: "top/*.pt", resume: "-r {checkpoint}", signal: USR1, grace: 5}
phases:
  - name: a
    checkpoint: null
    jobs:
      - {id: a1, cmd: t1, checkpoint: null}
      - {id: a2, cmd: t2, checkpoint: {path: "own/*.pt", resume: "-o {checkpoint}"}}
""")
    assert m.job_specs["a1"].checkpoint == CheckpointSpec("top/*.pt", "-r {checkpoint}",
                                                          signal="USR1", grace=5.0)
    assert m.job_specs["a2"].checkpoint == CheckpointSpec("own/*.pt", "-o {checkpoint}")


@pytest.mark.parametrize(("path", "message"), [
    ("/abs/*.pt", "job 'j': checkpoint path '/abs/*.pt' must be relative to the job's "
                  "working directory"),
    ("~/c/*.pt", "job 'j': checkpoint path '~/c/*.pt' must be relative to the job's "
                 "working directory"),
    ("../c/*.pt", "job 'j': checkpoint path '../c/*.pt' may not leave the job's directory "
                  "tree ('..')"),
    ("c/..", "job 'j': checkpoint path 'c/..' may not leave the job's directory tree ('..')"),
    ("c/x y;z$.pt", "job 'j': checkpoint path 'c/x y;z$.pt' holds ' $;': only letters, "
                    "digits, '_.,+=@%-', '/' and the glob's '*', '?', '[ ]' (no blanks or "
                    "shell syntax)"),
    ("c/a'b", "holds \"'\""),
    ("c/a\\\\b", "holds '\\\\'"),
    ("c/{a,b}", "holds '{}'"),
    ("c/a~b", "holds '~'"),
    ("c/a:b", "holds ':'"),
])
def test_a_rendered_path_outside_the_job_or_with_shell_syntax_is_refused(path: str,
                                                                        message: str) -> None:
    exc = error(f'project: p\njobs:\n  - id: j\n    cmd: x\n    checkpoint: {{path: "{path}", '
                f'resume: "-r {{checkpoint}}"}}\n')
    assert exc.key_path == "jobs[0].checkpoint.path", str(exc)
    assert message in exc.message, str(exc)
    assert exc.line == 5, str(exc)


def test_a_path_of_every_allowed_character_and_dots_in_names_is_kept() -> None:
    for path in ("aZ09_.,+=@%/*?[]-x.pt", "c/a..b/*.pt", "./c/*.pt", "c/.../x"):
        assert contract_of(f'{{path: "{path}", resume: "-r {{checkpoint}}"}}') \
            == CheckpointSpec(path, "-r {checkpoint}"), path
