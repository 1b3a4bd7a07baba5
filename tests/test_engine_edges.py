"""Engine edge cases on simulated hosts: lost sessions, preconditions, GPU readers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from eq_tui.hosts.nvml import NvmlReader
from eq_tui.manifest.model import Precondition
from tests.support.engine_run import FAST_JOB, job, make_manifest, start_engine

LONG_JOB = "fake-train --epochs 300 --epoch-seconds 0.1 --mem 1000"


@pytest.mark.integration
async def test_a_vanished_session_is_requeued_once_then_stuck(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("victim", LONG_JOB)])
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    host = run.engine.hosts["sim"]
    try:
        for attempt in (1, 2):
            await run.wait_for(lambda n=attempt: run.status("victim") == "running"
                               and len(run.engine.jobs["victim"].history) == n
                               and run.engine.jobs["victim"].last_line != "")
            current = run.engine.jobs["victim"].current
            assert current is not None
            # someone else ends the session (a reboot, a stray `screen -X quit`): no exit record
            await host.kill(current.session, current.attempt_dir, "screen")
        await run.wait_for(lambda: run.status("victim") == "stuck")
        record = run.engine.jobs["victim"]
        assert record.failure is not None and record.failure.cls == "lost"
        assert [a.failure_class for a in record.history] == ["lost", "lost"]
    finally:
        await run.stop()


@pytest.mark.integration
async def test_precondition_holds_the_job_until_the_checkpoint_exists(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt" / "teacher.pt"
    manifest = make_manifest(tmp_path, [
        job("student", FAST_JOB,
            preconditions=(Precondition(type="checkpoint_exists", path=str(ckpt)),)),
    ])
    run = await start_engine(manifest, tmp_path / "run")
    try:
        await run.wait_for(lambda: "precondition not met" in (
            run.engine.jobs["student"].reason or ""))
        assert run.status("student") == "pending" and not run.engine.jobs["student"].history
        ckpt.parent.mkdir()
        ckpt.write_text("weights")
        await run.wait_for(lambda: run.status("student") == "completed")
    finally:
        await run.stop()


def test_nvml_is_used_only_with_a_driver() -> None:
    # These machines have no NVIDIA driver: the reader declines and nvidia-smi is used.
    reader = NvmlReader.open()
    try:
        import pynvml

        pynvml.nvmlInit()
        has_driver = True
    except Exception:
        has_driver = False
    assert (reader is not None) == has_driver


@pytest.mark.integration
async def test_secret_env_values_never_reach_the_run_dir(tmp_path: Path) -> None:
    from dataclasses import replace

    from eq_tui.manifest.model import EnvVar

    secret = "hunter2-eq-tui-secret"
    digest = hashlib.sha256(secret.encode()).hexdigest()
    check = f'test "$(printf %s "$API_KEY" | sha256sum | cut -c1-64)" = {digest}'
    manifest = make_manifest(tmp_path, [job("uses_secret", f"{check} && {FAST_JOB}")])
    manifest = replace(manifest, env={"API_KEY": EnvVar(secret, secret=True)})
    run = await start_engine(manifest, tmp_path / "run")
    assert run.task is not None
    assert await run.task == 0  # the job saw the value...
    for path in (tmp_path / "run").rglob("*"):  # ...and no file of the run holds it
        if path.is_file() and not path.is_socket():
            assert secret.encode() not in path.read_bytes(), path
    assert "<secret>" in (tmp_path / "run" / "manifest.json").read_text()
