"""Small things a new user meets, on real sessions (sim hosts): what output_missing names, end
times to the sub-second, and a killed attempt's own record of how it ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.engine_run import FAST_JOB, job, make_manifest, run_to_end, start_engine

pytestmark = pytest.mark.integration
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
        assert (attempt / "exit").read_text().strip() == "143"
        last = (attempt / "log").read_text().rstrip().splitlines()[-1]
        assert last.startswith("eq-tui: killed by the user (SIGTERM to process group ")
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
