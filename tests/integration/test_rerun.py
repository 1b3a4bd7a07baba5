"""Running a manifest again after fixing what made jobs stuck (real sessions on a sim host,
through the real command line): it says so and how to retry, `--retry-stuck` retries them,
and a job whose command changed is retried by itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eq_tui.cli.main import main

pytestmark = pytest.mark.integration

MANIFEST = """\
project: p
poll: 0.2
crash_guard: false
hosts: [{{name: sim, simulate: {{gpus: 2}}}}]
jobs:
  - {{id: a, cmd: "python3 train.py --seed 1"}}
  - {{id: b, cmd: "{b_cmd}"}}
"""


def write(tmp: Path, b_cmd: str = "python3 train.py --seed 2") -> Path:
    manifest = tmp / "m.yaml"
    manifest.write_text(MANIFEST.format(b_cmd=b_cmd))
    return manifest


def jobs(tmp: Path) -> dict[str, dict]:
    state = json.loads((tmp / "experiment_queue" / "p" / "queue_state.json").read_text())
    return {job["id"]: job for job in state["jobs"]}


def test_a_rerun_says_how_to_retry_and_retry_stuck_retries(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('bad config')\n")
    manifest = write(tmp_path)
    assert main([str(manifest), "--no-ui"]) == 1
    first = jobs(tmp_path)
    assert {j["status"] for j in first.values()} == {"stuck"}
    # one counter: a failure that is never retried reads 1/1, not 1/3
    assert (first["a"]["attempts"], first["a"]["attempt_limit"]) == (1, 1)
    capsys.readouterr()

    script.write_text("print('fixed')\n")
    assert main([str(manifest), "--no-ui"]) == 1  # nothing retried by itself...
    out = capsys.readouterr().out
    assert "2 jobs are stuck from an earlier run (a, b)" in out  # ...but it says so, and how
    assert f"eq-tui {manifest} --retry-stuck" in out and "`r` in the UI" in out

    assert main([str(manifest), "--no-ui", "--retry-stuck"]) == 0
    assert "retrying 2 stuck job(s): a, b" in capsys.readouterr().err
    after = jobs(tmp_path)
    assert {j["status"] for j in after.values()} == {"completed"}
    assert (after["a"]["attempts"], after["a"]["retry_base"], after["a"]["attempt_limit"]) \
        == (2, 1, 2)
    assert [a["n"] for a in after["a"]["history"]] == [1, 2]


def test_a_job_whose_command_changed_is_retried_by_itself(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "train.py").write_text("raise SystemExit('bad config')\n")
    manifest = write(tmp_path)
    assert main([str(manifest), "--no-ui"]) == 1
    capsys.readouterr()
    write(tmp_path, b_cmd="echo fixed by hand")
    assert main([str(manifest), "--no-ui"]) == 1  # a is still stuck
    out = capsys.readouterr()
    assert "b: command changed since it was stuck; retrying with `echo fixed by hand`" \
        in out.out
    assert "1 job is stuck from an earlier run (a)" in out.out
    after = jobs(tmp_path)
    assert after["b"]["status"] == "completed" and after["a"]["status"] == "stuck"
    assert after["b"]["attempts"] == 2


def test_retry_stuck_does_not_go_with_dry_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["m.yaml", "--retry-stuck", "--dry-run"]) == 2
    assert "--retry-stuck" in capsys.readouterr().err


def test_dry_run_on_an_existing_run_dir_tells_the_truth(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "train.py").write_text("raise SystemExit('bad config')\n")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST.format(b_cmd="echo ok") + "  - {id: c, cmd: 'echo c'}\n")
    assert main([str(manifest), "--no-ui"]) == 1  # a stuck, b and c completed
    capsys.readouterr()
    # the edit: a's command fixed, c removed, d added
    manifest.write_text(MANIFEST.format(b_cmd="echo ok").replace(
        "python3 train.py --seed 1", "echo fixed") + "  - {id: d, cmd: 'echo d'}\n")
    state = tmp_path / "experiment_queue" / "p" / "queue_state.json"
    before = state.read_text()
    assert main([str(manifest), "--dry-run"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")
             and line.split()[0] in "abcd"}
    assert "stuck → pending" in lines["a"] and "[command changed: retried by itself]" in lines["a"]
    assert "sim:" in lines["a"]  # waiting: planned onto a GPU
    assert " completed " in lines["b"] and "sim:" not in lines["b"]  # done: not planned
    assert "[new]" in lines["d"] and "sim:" in lines["d"]
    assert "[retired: no longer in the manifest]" in lines["c"]
    assert "existing: " in out
    assert state.read_text() == before  # a dry run writes nothing

    assert main([str(manifest), "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    by_id = {job["id"]: job for job in plan["jobs"]}
    assert plan["existing"] is True
    assert by_id["b"]["status"] == "completed" and by_id["b"]["first"] is None


def test_the_retry_command_names_a_run_dir_that_is_not_the_default(tmp_path: Path) -> None:
    from eq_tui.api.model import JobState, JobStatus
    from eq_tui.engine.commands.rerun import stuck_notice

    stuck = [JobState(id="a", phase="main", cmd="x", status=JobStatus.STUCK)]
    source = str(tmp_path / "m.yaml")
    default = tmp_path / "experiment_queue" / "p"
    assert "--run-dir" not in (stuck_notice(source, stuck, default, "p") or "")
    notice = stuck_notice(source, stuck, tmp_path / "elsewhere", "p") or ""
    assert f"--retry-stuck --run-dir {tmp_path / 'elsewhere'}`" in notice
    assert "1 job is stuck from an earlier run (a)" in notice
