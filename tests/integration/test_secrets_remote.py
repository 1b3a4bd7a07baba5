"""Secrets and an engine on a real sshd host: a from_env value and one written in the manifest
(`value:` with `secret: true`) go over the SSH channel into the engine's memory, never into the
manifest copy or run dir under the host's ~/.eq-tui nor onto a command line; an engine there
without one launches nothing until `attach --resume` from an environment that has it: it
starts a stopped engine with it, or hands it to the running one over the control socket."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eq_tui.cli.remote.target import RemoteTarget
from tests.support.secret_search import command_lines_holding, files_holding, poll
from tests.support.sshbed import SshBed, ensure_user
from tests.support.tmux_attach import eq_tui_in_tmux, needs_tmux, quit_ui, wait_for_screen

pytestmark = pytest.mark.integration
EQ = [sys.executable, "-m", "eq_tui"]
MANIFEST = """\
project: {project}
hosts: [{{name: sim, simulate: {{gpus: 1}}}}]
env:
  TOKEN: {{from_env: EQ_REMOTE_TOKEN}}
  EQ_REMOTE_INLINE:
    secret: true
    value: {inline}
jobs:
  - id: uses_it
    cmd: 'printf %s "$TOKEN:$EQ_REMOTE_INLINE" | sha256sum | cut -c1-64 > got.sha && sleep 2'
    output_check: got.sha
"""


def eq_home() -> Path:
    """eq-tui's folder in the login user's home on the bed (looked up when a test runs: on a
    fresh machine that user does not exist before the first bed makes it)."""
    return Path(ensure_user().pw_dir) / ".eq-tui"


BED_HOSTS = [("gpu", 1, 24576, "Sim RTX")]
BED_WITH_EQ_TUI = ("gpu",)


_begun: dict[str, float] = {}  # project: when its test began (its secrets are new then)


@pytest.fixture
def project() -> Iterator[str]:
    name = f"secret_{secrets.token_hex(3)}"
    _begun[name] = time.time() - 2  # a margin for the file system's clock
    yield name
    shutil.rmtree(eq_home() / "runs" / name, ignore_errors=True)


def _eq(bed: SshBed, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EQ, *args, "--ssh-config", str(bed.ssh_config)],
                          capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL, env=env)


def _job(project: str) -> dict[str, object]:
    try:
        state = json.loads((eq_home() / "runs" / project / "run" /
                            "queue_state.json").read_text())
    except (OSError, ValueError):
        return {}
    result: dict[str, object] = state["jobs"][0]
    return result


def _write_manifest(tmp_path: Path, project: str) -> tuple[Path, str]:
    inline = f"inline-{secrets.token_hex(8)}"
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST.format(project=project, inline=inline))
    return manifest, inline


def _run_dir(project: str) -> Path:
    return eq_home() / "runs" / project / "run"


def _engine_pid(project: str) -> int | None:
    try:
        return int(json.loads((_run_dir(project) / "control.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def _check_nothing_holds(values: tuple[str, str], project: str) -> None:
    directory = eq_home() / "runs" / project
    copy = (directory / "m.yaml").read_text()
    assert "EQ_REMOTE_INLINE:" in copy and '"from_env": "EQ_REMOTE_INLINE"' in copy
    assert (directory / "run" / "engine.log").exists()
    for value in values:
        assert files_holding(eq_home(), value.encode(), since=_begun[project]) == []
        assert command_lines_holding(value.encode()) == []
    got = (directory / "got.sha").read_text().strip()
    assert got == hashlib.sha256(":".join(values).encode()).hexdigest()  # the job had both


def _started_without_the_secret(bed: SshBed, tmp_path: Path, project: str,
                                monkeypatch: pytest.MonkeyPatch) -> str:
    manifest, inline = _write_manifest(tmp_path, project)
    monkeypatch.delenv("EQ_REMOTE_TOKEN", raising=False)
    started = _eq(bed, dict(os.environ), str(manifest), "--detach", "--on", "gpu", "--poll",
                  "0.3")
    assert started.returncode == 0, started.stderr
    poll(lambda: _job(project).get("reason") == "secret TOKEN not provided",
         "the job to wait for its secret", 120)
    return inline


def test_detach_on_a_host_sends_the_secrets_over_ssh_only(bed: SshBed, tmp_path: Path,
                                                          project: str) -> None:
    value = f"remote-{secrets.token_hex(8)}"
    manifest, inline = _write_manifest(tmp_path, project)
    started = _eq(bed, {**os.environ, "EQ_REMOTE_TOKEN": value}, str(manifest), "--detach",
                  "--on", "gpu", "--poll", "0.3")
    assert started.returncode == 0, started.stderr
    poll(lambda: _job(project).get("status") == "running", "the job to run", 120)
    for held in (value, inline):
        assert command_lines_holding(held.encode()) == []
    poll(lambda: _job(project).get("status") == "completed", "the job to complete", 120)
    _check_nothing_holds((value, inline), project)
    # the copy is the file as written but for the secret's value: every line where it was
    sent = (eq_home() / "runs" / project / "m.yaml").read_text().splitlines()
    written = manifest.read_text().splitlines()
    assert [n for n, (a, b) in enumerate(zip(written, sent, strict=True)) if a != b] == [6]


def test_an_engine_without_its_secret_waits_until_a_resume_brings_it(
        bed: SshBed, tmp_path: Path, project: str, monkeypatch: pytest.MonkeyPatch) -> None:
    value = f"later-{secrets.token_hex(8)}"
    inline = _started_without_the_secret(bed, tmp_path, project, monkeypatch)
    where = f"gpu:{_run_dir(project)}"
    assert _eq(bed, dict(os.environ), "stop", where).returncode == 0
    poll(lambda: _eq(bed, dict(os.environ), "stop", where).returncode == 3,
         "the engine to exit", 120)

    # what `eq-tui attach HOST:RUN_DIR --resume` does, from an environment with the secrets:
    # the one written in the manifest is handed over as $EQ_REMOTE_INLINE, like a from_env one
    from eq_tui.cli.attach import _resume_remote

    monkeypatch.setenv("EQ_REMOTE_TOKEN", value)
    monkeypatch.setenv("EQ_REMOTE_INLINE", inline)
    asyncio.run(_resume_remote(RemoteTarget("gpu", str(_run_dir(project))),
                               str(bed.ssh_config)))
    poll(lambda: _job(project).get("status") == "completed", "the job to complete", 120)
    _check_nothing_holds((value, inline), project)


@needs_tmux
def test_attach_resume_hands_the_secret_to_the_engine_running_there(
        bed: SshBed, tmp_path: Path, project: str, monkeypatch: pytest.MonkeyPatch) -> None:
    value = f"handed-{secrets.token_hex(8)}"
    inline = _started_without_the_secret(bed, tmp_path, project, monkeypatch)
    pid = _engine_pid(project)
    assert pid is not None
    where = f"gpu:{_run_dir(project)}"
    with eq_tui_in_tmux(["attach", where, "--resume", "--ssh-config", str(bed.ssh_config)],
                        {**os.environ, "EQ_REMOTE_TOKEN": value}) as socket:
        poll(lambda: _job(project).get("status") == "running", "the job to run", 120)
        assert _engine_pid(project) == pid  # no restart: the engine that waited runs it
        for held in (value, inline):
            assert command_lines_holding(held.encode()) == []
        wait_for_screen(socket, lambda s: "uses_it" in s)
        screen = quit_ui(socket).replace("\n", "")
    assert "EXIT=0" in screen
    assert f"handed the engine of {where} the secrets it lacked: TOKEN" in screen
    poll(lambda: _job(project).get("status") == "completed", "the job to complete", 120)
    assert _job(project)["attempts"] == 1
    _check_nothing_holds((value, inline), project)
