"""A from_env secret and an engine on a real sshd host: the value goes over the SSH channel
into the engine's memory, never into the manifest copy or run dir under the host's ~/.eq-tui
nor onto a command line; an engine started there without it launches nothing until a resume
from an environment that has it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eq_tui.remote.target import RemoteTarget
from tests.support.remote_eq import check_eq_tui_runs_there, install_eq_tui
from tests.support.secret_search import command_lines_holding, files_holding, poll
from tests.support.sshbed import USER, SshBed

pytestmark = pytest.mark.integration
EQ = [sys.executable, "-m", "eq_tui"]
MANIFEST = """\
project: {project}
hosts: [{{name: sim, simulate: {{gpus: 1}}}}]
env:
  TOKEN: {{from_env: EQ_REMOTE_TOKEN}}
jobs:
  - id: uses_it
    cmd: 'printf %s "$TOKEN" | sha256sum | cut -c1-64 > got.sha && sleep 2'
    output_check: got.sha
"""
HOME = Path(pwd.getpwnam(USER).pw_dir)


@pytest.fixture(scope="module")
def bed() -> Iterator[SshBed]:
    ssh_bed = SshBed.create([("gpu", 1, 24576, "Sim RTX")])
    try:
        install_eq_tui(ssh_bed.hosts["gpu"])
        check_eq_tui_runs_there(ssh_bed, "gpu")
        yield ssh_bed
    finally:
        ssh_bed.close()


@pytest.fixture
def project() -> Iterator[str]:
    name = f"secret_{secrets.token_hex(3)}"
    yield name
    shutil.rmtree(HOME / ".eq-tui" / "runs" / name, ignore_errors=True)


def _eq(bed: SshBed, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EQ, *args, "--ssh-config", str(bed.ssh_config)],
                          capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL, env=env)


def _job(project: str) -> dict[str, object]:
    try:
        state = json.loads((HOME / ".eq-tui" / "runs" / project / "run" /
                            "queue_state.json").read_text())
    except (OSError, ValueError):
        return {}
    result: dict[str, object] = state["jobs"][0]
    return result


def _check_nothing_holds(value: str, project: str) -> None:
    directory = HOME / ".eq-tui" / "runs" / project
    assert (directory / "m.yaml").exists() and (directory / "run" / "engine.log").exists()
    assert files_holding(HOME / ".eq-tui", value.encode()) == []
    assert command_lines_holding(value.encode()) == []
    got = (directory / "got.sha").read_text().strip()
    assert got == hashlib.sha256(value.encode()).hexdigest()  # the job had the value


def test_detach_on_a_host_sends_the_secret_over_ssh_only(bed: SshBed, tmp_path: Path,
                                                         project: str) -> None:
    value = f"remote-{secrets.token_hex(8)}"
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST.format(project=project))
    started = _eq(bed, {**os.environ, "EQ_REMOTE_TOKEN": value}, str(manifest), "--detach",
                  "--on", "gpu", "--poll", "0.3")
    assert started.returncode == 0, started.stderr
    poll(lambda: _job(project).get("status") == "running", "the job to run", 120)
    assert command_lines_holding(value.encode()) == []
    poll(lambda: _job(project).get("status") == "completed", "the job to complete", 120)
    _check_nothing_holds(value, project)


def test_an_engine_without_its_secret_waits_until_a_resume_brings_it(
        bed: SshBed, tmp_path: Path, project: str, monkeypatch: pytest.MonkeyPatch) -> None:
    value = f"later-{secrets.token_hex(8)}"
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST.format(project=project))
    monkeypatch.delenv("EQ_REMOTE_TOKEN", raising=False)
    started = _eq(bed, dict(os.environ), str(manifest), "--detach", "--on", "gpu", "--poll",
                  "0.3")
    assert started.returncode == 0, started.stderr
    poll(lambda: _job(project).get("reason") == "secret TOKEN not provided",
         "the job to wait for its secret", 120)
    where = f"gpu:{HOME}/.eq-tui/runs/{project}/run"
    assert _eq(bed, dict(os.environ), "stop", where).returncode == 0
    poll(lambda: _eq(bed, dict(os.environ), "stop", where).returncode == 3,
         "the engine to exit", 120)

    # what `eq-tui attach HOST:RUN_DIR --resume` does, from an environment with the secret
    from eq_tui.attach import _resume_remote

    monkeypatch.setenv("EQ_REMOTE_TOKEN", value)
    asyncio.run(_resume_remote(RemoteTarget("gpu", f"{HOME}/.eq-tui/runs/{project}/run"),
                               str(bed.ssh_config)))
    poll(lambda: _job(project).get("status") == "completed", "the job to complete", 120)
    _check_nothing_holds(value, project)
