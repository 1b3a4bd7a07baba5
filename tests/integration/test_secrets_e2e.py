"""Secrets through a detached engine, end to end: an engine started without a from_env secret
launches nothing and says why; `eq-tui attach --resume` from an environment that has it hands
it over (the start pipe of an engine it starts, or the control socket of the engine already
running, which then launches without a restart); the job gets it, and a secret written in the
manifest too; and neither value is in any file of the run dir (state, manifest copy, events,
summary, logs) nor on any process's command line."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.secret_search import command_lines_holding, files_holding, poll
from tests.support.tmux_attach import eq_tui_in_tmux, needs_tmux, quit_ui, wait_for_screen

pytestmark = pytest.mark.integration
EQ = [sys.executable, "-m", "eq_tui"]
MANIFEST = """\
project: secretive
cwd: {cwd}
hosts: [{{name: sim, simulate: {{gpus: 1}}}}]
env:
  TOKEN: {{from_env: EQ_E2E_TOKEN}}
  EQ_E2E_INLINE: {{value: {inline}, secret: true}}
jobs:
  - id: uses_it
    cmd: 'printf %s "$TOKEN:$EQ_E2E_INLINE" | sha256sum | cut -c1-64 > got.sha && sleep 2'
    output_check: got.sha
"""


@pytest.fixture(autouse=True)
def no_engine_left(tmp_path: Path) -> Iterator[None]:
    """A test that fails leaves no engine waiting for its secret."""
    yield
    subprocess.run([*EQ, "stop", str(tmp_path / "run")], capture_output=True, timeout=60)


def job(run_dir: Path) -> dict[str, object]:
    try:
        state = json.loads((run_dir / "queue_state.json").read_text())
    except (OSError, ValueError):
        return {}
    result: dict[str, object] = state["jobs"][0]
    return result


def engine_pid(run_dir: Path) -> int | None:
    try:
        return int(json.loads((run_dir / "control.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def _started_without_the_secret(tmp_path: Path) -> tuple[Path, Path, str]:
    inline = f"inl-{secrets.token_hex(8)}"
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST.format(cwd=tmp_path, inline=inline))
    run_dir = tmp_path / "run"
    without = {k: v for k, v in os.environ.items() if k != "EQ_E2E_TOKEN"}
    started = subprocess.run([*EQ, str(manifest), "--detach", "--poll", "0.2", "--run-dir",
                              str(run_dir)], capture_output=True, text=True, timeout=90,
                             env=without)
    assert started.returncode == 0, started.stderr
    assert "secret TOKEN not provided ($EQ_E2E_TOKEN is not set)" in started.stderr
    poll(lambda: job(run_dir).get("reason") == "secret TOKEN not provided",
         "the job to wait for its secret")
    assert job(run_dir)["status"] == "pending"
    return manifest, run_dir, inline


def _check_nothing_holds(tmp_path: Path, manifest: Path, value: str, inline: str) -> None:
    got = (tmp_path / "got.sha").read_text().strip()
    assert got == hashlib.sha256(f"{value}:{inline}".encode()).hexdigest()  # the job had both
    poll(lambda: (tmp_path / "run" / "summary.md").exists(), "the summary")
    assert (tmp_path / "run" / "engine.log").exists()
    assert (tmp_path / "run" / "events.jsonl").exists()
    assert files_holding(tmp_path, value.encode()) == []
    assert files_holding(tmp_path, inline.encode()) == [str(manifest)]  # only where written
    for held in (value, inline):
        assert command_lines_holding(held.encode()) == []


def test_a_detached_engine_gets_the_secret_over_its_start_pipe_and_writes_it_nowhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    value = f"s3cret-{secrets.token_hex(8)}"
    manifest, run_dir, inline = _started_without_the_secret(tmp_path)
    stopped = subprocess.run([*EQ, "stop", str(run_dir)], capture_output=True, text=True,
                             timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    poll(lambda: subprocess.run([*EQ, "stop", str(run_dir)], capture_output=True,
                                timeout=60).returncode == 3, "the engine to exit")

    # what `eq-tui attach RUN_DIR --resume` does when no engine runs, from an environment
    # that has the secret (the UI it opens afterwards is not needed here)
    from eq_tui.cli.attach import EngineNotRunning, _not_running_here

    monkeypatch.setenv("EQ_E2E_TOKEN", value)
    offer = _not_running_here(run_dir, None)
    assert isinstance(offer, EngineNotRunning)
    offer.start()
    poll(lambda: job(run_dir).get("status") == "running", "the job to run")
    for held in (value, inline):
        assert command_lines_holding(held.encode()) == []
    poll(lambda: job(run_dir).get("status") == "completed", "the job to complete")
    _check_nothing_holds(tmp_path, manifest, value, inline)


@needs_tmux
def test_attach_resume_hands_the_secret_to_the_running_engine_without_a_restart(
        tmp_path: Path) -> None:
    value = f"live-{secrets.token_hex(8)}"
    manifest, run_dir, inline = _started_without_the_secret(tmp_path)
    pid = engine_pid(run_dir)
    assert pid is not None
    with eq_tui_in_tmux(["attach", str(run_dir), "--resume"],
                        {**os.environ, "EQ_E2E_TOKEN": value}) as socket:
        poll(lambda: job(run_dir).get("status") == "running", "the job to run", 120)
        assert engine_pid(run_dir) == pid  # the engine that waited runs it
        for held in (value, inline):
            assert command_lines_holding(held.encode()) == []
        wait_for_screen(socket, lambda s: "uses_it" in s)
        screen = quit_ui(socket)
    assert "EXIT=0" in screen
    assert (f"handed the engine of {run_dir} the secrets it lacked: TOKEN"
            in screen.replace("\n", ""))
    poll(lambda: job(run_dir).get("status") == "completed", "the job to complete")
    assert job(run_dir)["attempts"] == 1
    _check_nothing_holds(tmp_path, manifest, value, inline)
