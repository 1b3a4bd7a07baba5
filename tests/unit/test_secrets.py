"""Secrets from the environment or an owner-only file: resolved outside the loader, never in
manifest.json, and while one is missing no job launches (the scheduler says which)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.decide.scheduler import GpuView, HostView, decide
from eq_tui.errors import ManifestError
from eq_tui.manifest.loader import load_manifest, load_manifest_text
from eq_tui.manifest.secret_copy import copy_without_secrets
from eq_tui.manifest.secrets import (
    handed_over,
    missing_secrets,
    read_handed_over,
    resolve,
    warnings,
)

VALUE = "tok-51f0c2-secret"
MANIFEST = """\
project: s
hosts: [{name: h, simulate: {gpus: 2}}]
env:
  PLAIN: visible
  TOKEN: {from_env: EQ_TEST_TOKEN}
  KEYFILE: {from_file: key.txt}
phases:
  - {name: a, jobs: [{id: a1, cmd: "true"}]}
  - {name: b, depends_on: a, jobs: [{id: b1, cmd: "true"}]}
"""


@pytest.fixture
def manifest_path(tmp_path: Path) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST)
    return path


def _key_file(tmp_path: Path, mode: int) -> Path:
    key = tmp_path / "key.txt"
    key.write_text(VALUE + "-file\n")
    key.chmod(mode)
    return key


def test_the_loader_records_where_secrets_live_not_their_values(manifest_path: Path) -> None:
    manifest = load_manifest(manifest_path)
    token, keyfile = manifest.env["TOKEN"], manifest.env["KEYFILE"]
    assert token.from_env == "EQ_TEST_TOKEN" and token.secret and not token.provided
    assert keyfile.from_file == "key.txt"  # as written: read beside the manifest
    assert keyfile.line == 6
    assert missing_secrets(manifest) == ["TOKEN", "KEYFILE"]


def test_resolve_reads_the_environment_and_an_owner_only_file(manifest_path: Path) -> None:
    _key_file(manifest_path.parent, 0o600)
    manifest = resolve(load_manifest(manifest_path), environ={"EQ_TEST_TOKEN": VALUE})
    assert manifest.env["TOKEN"].value == VALUE
    assert manifest.env["KEYFILE"].value == VALUE + "-file"  # without the trailing newline
    assert missing_secrets(manifest) == []
    assert handed_over(manifest) == {"TOKEN": VALUE, "KEYFILE": VALUE + "-file"}
    saved = json.dumps(manifest.to_json())
    assert VALUE not in saved and "EQ_TEST_TOKEN" in saved and "visible" in saved


def test_a_secret_file_others_may_read_is_refused(manifest_path: Path) -> None:
    key = _key_file(manifest_path.parent, 0o640)
    with pytest.raises(ManifestError) as caught:
        resolve(load_manifest(manifest_path), environ={})
    message = str(caught.value)
    assert f"{manifest_path}:6: env.KEYFILE.from_file" in message
    assert "others may read it (mode 0640)" in message and f"chmod 600 {key}" in message


def test_values_handed_over_win_and_a_missing_one_is_named(manifest_path: Path) -> None:
    manifest = resolve(load_manifest(manifest_path), {"KEYFILE": "given"},
                       environ={"EQ_TEST_TOKEN": VALUE})
    assert manifest.env["KEYFILE"].value == "given"  # no file needed
    lacking = resolve(load_manifest(manifest_path), environ={})
    assert missing_secrets(lacking) == ["TOKEN", "KEYFILE"]
    said = warnings(lacking)
    assert any("secret TOKEN not provided ($EQ_TEST_TOKEN is not set)" in w for w in said)


def test_dry_run_warns_about_a_secret_written_in_the_manifest() -> None:
    manifest = load_manifest_text("env: {K: {value: v, secret: true}}\n"
                                  "jobs: [{id: a, cmd: x}]\n")
    assert any(w.startswith("env.K: a secret written in the manifest") and "from_env" in w
               for w in warnings(manifest))


def test_stdin_hand_over_must_be_a_json_object(tmp_path: Path) -> None:
    good = tmp_path / "in"
    good.write_text(json.dumps({"TOKEN": VALUE}))
    with good.open() as stream:
        assert read_handed_over(stream) == {"TOKEN": VALUE}
    good.write_text("[1]")
    with good.open() as stream, pytest.raises(Exception, match="must map names to strings"):
        read_handed_over(stream)


def _hosts() -> list[HostView]:
    return [HostView(name="h", usable=True, gpus=(GpuView(0, 0), GpuView(1, 0)), allowed=None,
                     max_parallel=4)]


def test_no_job_launches_while_a_secret_is_missing(manifest_path: Path) -> None:
    _key_file(manifest_path.parent, 0o600)
    lacking = resolve(load_manifest(manifest_path), environ={})
    jobs = [JobState(id="a1", phase="a", cmd="true"), JobState(id="b1", phase="b", cmd="true")]
    decision = decide(lacking, jobs, _hosts(), now=0.0, paused=False, preconditions={})
    assert decision.launches == []
    assert decision.waiting["a1"] == "secret TOKEN not provided"
    # a failed dependency still blocks, secret or not
    jobs[0].status = JobStatus.STUCK
    decision = decide(lacking, jobs, _hosts(), now=0.0, paused=False, preconditions={})
    assert "b1" in decision.block and "b1" not in decision.waiting

    jobs[0].status = JobStatus.PENDING
    ready = resolve(load_manifest(manifest_path), environ={"EQ_TEST_TOKEN": VALUE})
    decision = decide(ready, jobs, _hosts(), now=0.0, paused=False, preconditions={})
    assert [launch.job_id for launch in decision.launches] == ["a1"]


def test_the_environment_of_this_test_has_no_token() -> None:
    assert "EQ_TEST_TOKEN" not in os.environ  # the cases above rely on it


def test_a_secret_file_under_home_is_read_from_this_users_home(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".wandb").write_text(VALUE)
    (tmp_path / ".wandb").chmod(0o400)
    manifest = resolve(load_manifest_text("env: {W: {from_file: ~/.wandb}}\n"
                                          "jobs: [{id: a, cmd: x}]\n", str(tmp_path / "m.yaml")))
    assert manifest.env["W"].value == VALUE
    assert manifest.to_json()["env"]["W"] == {"from_file": "~/.wandb", "secret": True}


INLINE = """\
project: s  # the secret is {value}-flow
env:
  PLAIN: visible
  FLOW: {{value: {value}-flow, secret: true}}
  BLOCK:
    secret: true
    value: |
      {value}-block
      second line
  ALSO: {{"value": "{value}-quoted", "secret": true}}
jobs: [{{id: a1, cmd: "true"}}]
"""


def test_the_copy_for_a_host_holds_no_inline_secret_and_keeps_every_other_line(
        tmp_path: Path) -> None:
    text = INLINE.format(value="inl").replace("# the secret is inl-flow", "# a comment")
    copy = copy_without_secrets(text.encode(), str(tmp_path / "m.yaml"))
    assert copy.values == {"FLOW": "inl-flow", "BLOCK": "inl-block\nsecond line\n",
                           "ALSO": "inl-quoted"}
    written = copy.data.decode()
    assert "inl" not in written
    before, after = text.splitlines(), written.splitlines()
    assert len(before) == len(after)
    changed = [n for n, (old, new) in enumerate(zip(before, after, strict=True), 1)
               if old != new]
    assert changed == [4, 7, 8, 9, 10]  # the value lines; the block's now blank
    assert after[3] == '  FLOW: {"from_env": "FLOW", secret: true}'
    assert after[6] == '    "from_env": "BLOCK"' and after[7:9] == ["", ""]
    loaded = load_manifest_text(written, str(tmp_path / "m.yaml"))
    assert {name: var.from_env for name, var in loaded.env.items()} == {
        "PLAIN": None, "FLOW": "FLOW", "BLOCK": "BLOCK", "ALSO": "ALSO"}
    plain = MANIFEST.encode()
    assert copy_without_secrets(plain, "m.yaml").data is plain  # nothing to take out


def test_a_copy_that_would_still_hold_the_value_is_refused() -> None:
    text = INLINE.format(value="inl")  # the comment on line 1 holds it too
    with pytest.raises(ManifestError) as caught:
        copy_without_secrets(text.encode(), "m.yaml")
    assert str(caught.value).startswith("m.yaml:4: env.FLOW: this secret's value cannot be "
                                        "left out of the manifest copy")
    assert "also written elsewhere in the file" in str(caught.value)
    shared = ("env:\n  A: &v {value: k, secret: true}\n  B: *v\n"
              "jobs: [{id: a, cmd: x}]\n")
    with pytest.raises(ManifestError, match="anchor"):
        copy_without_secrets(shared.encode(), "m.yaml")


def test_a_secret_source_is_read_whole_and_its_mistakes_name_their_key() -> None:
    from eq_tui.manifest.model import EnvVar

    text = ("project: s\nhosts: [{name: h, simulate: {gpus: 1}}]\njobs: [{id: j, cmd: x}]\n"
            "env:\n  T: {from_env: EQ_T}\n  K: {from_file: ~/k.txt}\n")
    env = load_manifest_text(text, "m.yaml").env
    assert env["T"] == EnvVar("", True, from_env="EQ_T", provided=False)
    assert env["K"] == EnvVar("", True, from_file="~/k.txt", provided=False)
    assert (env["T"].line, env["K"].line) == (5, 6)
    base = "project: s\nhosts: [{name: h, simulate: {gpus: 1}}]\njobs: [{id: j, cmd: x}]\nenv:\n"
    for body, key_path, message in (
            ("  T: {from_env: 5}\n", "env.T.from_env", "expected a string"),
            ("  T: {from_file: [x]}\n", "env.T.from_file", "expected a string"),
            ("  T: {from_file: ''}\n", "env.T.from_file", "from_file needs a path"),
            ("  T: {}\n", "env.T", "give exactly one of 'value', 'from_env' or 'from_file'")):
        with pytest.raises(ManifestError) as caught:
            load_manifest_text(base + body, "m.yaml")
        assert caught.value.key_path == key_path, str(caught.value)
        assert caught.value.message.startswith(message), str(caught.value)
        if body == "  T: {}\n":
            assert caught.value.message == message
