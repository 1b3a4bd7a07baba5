"""Engine edge cases on real sessions (sim hosts): lost sessions, preconditions, GPU readers;
and small things a new user meets: what output_missing names, end times to the sub-second,
and a killed attempt's own record of how it ended."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from eq_tui.hosts.nvml import NvmlReader
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.manifest.model import Precondition
from tests.support.engine_run import FAST_JOB, job, make_manifest, run_to_end, start_engine

LONG_JOB = "fake-train --epochs 300 --epoch-seconds 0.1 --mem 1000"


@pytest.mark.integration
async def test_a_vanished_session_is_requeued_retry_lost_times_then_stuck(
        tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("victim", LONG_JOB, retry_lost=2)])
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    host = run.engine.hosts["sim"]
    try:
        for attempt in (1, 2, 3):
            await run.wait_for(lambda n=attempt: run.status("victim") == "running"
                               and len(run.engine.jobs["victim"].history) == n
                               and run.engine.jobs["victim"].last_line != "")
            current = run.engine.jobs["victim"].current
            assert current is not None
            # someone else ends the session (a reboot, a stray `screen -X quit`): no exit record
            # (eq-tui's own stop would leave the wrapper up to record the exit)
            assert isinstance(host, ShellHost)
            quit_ = await host.runner.run(
                'case $1 in screen) screen -S "$2" -X quit ;; '
                '*) tmux -L eq-tui kill-session -t "=$2" ;; esac',
                [run.engine.ctx.manifest.launcher, current.session])
            assert quit_.returncode == 0, quit_.stderr
        await run.wait_for(lambda: run.status("victim") == "stuck")
        record = run.engine.jobs["victim"]
        assert record.failure is not None and record.failure.cls == "lost"
        assert [a.failure_class for a in record.history] == ["lost", "lost", "lost"]
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


# ---- small things a new user meets ----------------------------------------------------

LONG_JOB = "fake-train --epochs 200 --epoch-seconds 0.2 --mem 1000"


async def test_output_missing_names_the_glob_and_the_directory(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("a", output_check="out/${JOB_ID}-*.json")])
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 1
    failure = run.job("a")["failure"]
    assert failure["class"] == "output_missing"
    assert failure["detail"] == (f"exit 0 but output_check `out/a-*.json` (in {tmp_path}) "
                                 "matched nothing")


async def test_an_attempt_ends_to_the_sub_second_and_never_before_it_started(
        tmp_path: Path) -> None:
    code, run = await run_to_end(make_manifest(tmp_path, [job("a", FAST_JOB)]),
                                 tmp_path / "run")
    assert code == 0
    attempt = run.job("a")["history"][0]
    written = float((Path(attempt["attempt_dir"]) / "end").read_text())
    assert attempt["end"] == written  # the wrapper's own clock reading, not the file's mtime
    assert attempt["start"] <= attempt["end"]


async def test_a_killed_attempt_records_its_exit_and_says_so_in_its_log(tmp_path: Path) -> None:
    run = await start_engine(make_manifest(tmp_path, [job("long", LONG_JOB)]), tmp_path / "run",
                             exit_when_done=False)
    try:
        await run.wait_for(lambda: run.status("long") == "running")
        assert (await run.engine.command("kill", ["long"]))["ok"]
        attempt = Path(run.engine.jobs["long"].history[0].attempt_dir)
        # LONG_JOB has no handler: it ends on its SIGTERM, and its record says so
        assert (attempt / "exit").read_text().splitlines() == [
            "143", "stop TERM", "signal TERM", "grace 5", "grace_ran_out 0"]
        last = (attempt / "log").read_text().rstrip().splitlines()[-1]
        assert last.startswith("eq-tui: killed by the user (SIGTERM to the job, which ended "
                               "within the 5 s grace; process group ")
        assert float((attempt / "end").read_text()) > 0
        assert run.engine.jobs["long"].failure.detail == "killed by the user"  # type: ignore
    finally:
        await run.stop()


def test_the_lock_error_names_the_run_dir_and_the_commands_for_it(tmp_path: Path) -> None:
    from eq_tui.engine.state.store import RunDir
    from eq_tui.errors import RunDirError

    held = RunDir(tmp_path / "run")
    held.create()
    held.acquire_lock()
    try:
        with pytest.raises(RunDirError) as caught:
            RunDir(tmp_path / "run").acquire_lock()
        message = str(caught.value)
        assert f"eq-tui attach {tmp_path / 'run'}" in message
        assert f"eq-tui stop {tmp_path / 'run'}" in message
    finally:
        held.release_lock()


async def test_a_kill_terms_the_whole_process_group_even_what_ignores_hangups(
        tmp_path: Path) -> None:
    """Ending the session only hangs up; a child that ignores SIGHUP (nohup, a DataLoader
    worker that set its own handlers) must still go: kill.sh TERMs the process group."""
    import os

    child = tmp_path / "child"
    cmd = f"nohup sleep 300 >/dev/null 2>&1 & echo $! > {child}; wait"
    run = await start_engine(make_manifest(tmp_path, [job("long", cmd)]), tmp_path / "run",
                             exit_when_done=False)
    try:
        await run.wait_for(lambda: run.status("long") == "running" and child.exists()
                           and child.read_text().strip() != "")
        pid = int(child.read_text())
        assert (await run.engine.command("kill", ["long"]))["ok"]

        def gone() -> bool:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            with open(f"/proc/{pid}/stat") as stat:  # a zombie waiting for its reaper
                return stat.read().split(") ")[1].startswith("Z")

        await run.wait_for(gone, timeout=15)
    finally:
        await run.stop()
