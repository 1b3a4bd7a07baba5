"""The command line: usage errors, status, exit codes — through the real entry point."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from eq_tui.api.model import Attempt, Failure, JobState, JobStatus
from eq_tui.cli.main import main

EQ = [sys.executable, "-m", "eq_tui"]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EQ, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_help_lists_the_contract() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for flag in ("--no-ui", "--json", "--dry-run", "--run-dir", "--fresh", "--poll", "--theme",
                 "eq-tui status RUN_DIR", "exit codes"):
        assert flag in result.stdout


@pytest.mark.parametrize("args", [
    [], ["--no-such-flag", "m.yaml"], ["m.yaml", "--json"], ["m.yaml", "--poll", "-1"],
    ["a.yaml", "b.yaml", "--run-dir", "x"], ["status"],
    # a verb's own checks, after argparse: the verb named once, after the program's name
    ["kill", "run", "bad/id"], ["kill", "run"], ["edit", "run", "j1"], ["add", "run"],
    ["add", "run", "--mem", "18GB", "--", "true"], ["priority", "run", "j1", "high"],
    ["release", "run", "j1", "--phase", "main"], ["init", "--hosts", "sim:2"],
])
def test_usage_errors_exit_2_without_traceback(args: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("eq-tui")
    assert "eq-tui: eq-tui" not in err  # the program's name once
    if args and args[0] in {"kill", "edit", "add", "priority", "release", "init"}:
        assert err.startswith(f"eq-tui: {args[0]}"), err


def _write_state(run_dir: Path) -> None:
    run_dir.mkdir(parents=True)
    jobs = [JobState(id="a", phase="main", cmd="x", status=JobStatus.COMPLETED),
            JobState(id="b", phase="main", cmd="x", status=JobStatus.STUCK, attempts=1,
                     failure=Failure("exit_nonzero", "ValueError: nan"),
                     history=[Attempt(1, "h", [0], "s", "/logs/b/a1", "/logs/b/a1/log")])]
    (run_dir / "queue_state.json").write_text(json.dumps(
        {"version": 1, "project": "p", "jobs": [j.to_json() for j in jobs]}))


def test_status_prints_counts_and_who_needs_a_person(tmp_path: Path) -> None:
    _write_state(tmp_path / "run")
    result = run_cli("status", str(tmp_path / "run"))
    assert result.returncode == 1, result.stderr  # a job needs a person
    assert "completed   1" in result.stdout and "stuck       1" in result.stdout
    assert "b" in result.stdout and "stuck [exit_nonzero] ValueError: nan" in result.stdout
    as_json = json.loads(run_cli("status", str(tmp_path / "run"), "--json").stdout)
    assert as_json["counts"] == {"completed": 1, "stuck": 1}


def test_status_of_a_missing_or_broken_run_dir_exits_3(tmp_path: Path) -> None:
    missing = run_cli("status", str(tmp_path / "nope"))
    assert missing.returncode == 3 and "nope: no such file or directory" in missing.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "queue_state.json").write_text('{"jobs": [')
    result = run_cli("status", str(broken))
    assert result.returncode == 3 and "unreadable" in result.stderr
    assert "Traceback" not in result.stderr


def test_status_exits_0_when_nobody_is_needed_and_1_job_is_one_job(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    job = JobState(id="a", phase="main", cmd="x", status=JobStatus.COMPLETED)
    (run_dir / "queue_state.json").write_text(json.dumps(
        {"version": 1, "project": "p", "jobs": [job.to_json()]}))
    result = run_cli("status", str(run_dir))
    assert result.returncode == 0 and "p: 1 job (" in result.stdout


def test_a_killed_job_is_listed_without_repeating_killed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    job = JobState(id="k", phase="main", cmd="x", status=JobStatus.KILLED,
                   failure=Failure("killed", "killed by the user"))
    (run_dir / "queue_state.json").write_text(json.dumps(
        {"version": 1, "project": "p", "jobs": [job.to_json()]}))
    result = run_cli("status", str(run_dir))
    assert "k                            killed by the user" in result.stdout
    assert "killed killed" not in result.stdout


def test_status_into_a_closed_pipe_prints_no_traceback(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    jobs = [JobState(id=f"job{i:05d}", phase="main", cmd="x", status=JobStatus.STUCK,
                     failure=Failure("exit_nonzero", "ValueError: " + "x" * 80))
            for i in range(3000)]  # far more than a pipe holds: the writer meets EPIPE
    (run_dir / "queue_state.json").write_text(json.dumps(
        {"version": 1, "project": "p", "jobs": [j.to_json() for j in jobs]}))
    result = subprocess.run(
        f"{shlex.quote(sys.executable)} -m eq_tui status {shlex.quote(str(run_dir))} | head -1",
        shell=True, capture_output=True, text=True, timeout=120)
    assert result.stdout.startswith("p: 3000 jobs")
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
