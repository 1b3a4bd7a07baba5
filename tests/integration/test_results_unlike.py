"""Results that say when they average unlike things: a job edited from the shell after it ran
(`edit --set epochs=2`) makes its configuration's row say its jobs ran different commands, and
that row is never ranked best; a manifest changed after jobs completed is told by `--dry-run`
(which jobs, and `--rerun-changed`), which runs them again. Real runs on simulated GPUs, the
real entry point; what ran read from the attempt dirs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration
EQ = [sys.executable, "-m", "eq_tui"]
MANIFEST = """\
project: unlike
hosts: [{{name: sim, simulate: {{gpus: 2}}}}]
poll: 0.3
goal: {{val_acc: max}}
grid: {{lr: ["0.1", "0.01", "0.001"], seed: [1, 2]}}
template:
  cmd: "fake-train --lr ${{lr}} --seed ${{seed}} --epochs {epochs} --epoch-seconds 0.05 --mem 500"
"""


def eq(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EQ, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def rows(cwd: Path) -> list[dict[str, Any]]:
    done = eq("results", ".", "--format", "json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)["rows"]
    return found


def best_row(found: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((row for row in found if row["metrics"]["val_acc"]["best"]), None)


def attempts(run_dir: Path, job: str) -> list[str]:
    return sorted(path.read_text().strip()
                  for path in run_dir.glob(f"logs/*/{job}/a*/cmd"))


def test_an_edited_job_flags_its_row_and_a_changed_manifest_is_told_and_rerun(
        tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(MANIFEST.format(epochs=3))
    assert eq("m.yaml", "--no-ui", cwd=tmp_path).returncode == 0
    run_dir = tmp_path / "experiment_queue" / "unlike"
    before = rows(tmp_path)
    assert not any(row["commands_differ"] for row in before)
    best = best_row(before)
    assert best is not None
    # edit one job of the best row after it ran: it runs again with --epochs 2
    edited = best["jobs"][0]
    done = eq("edit", ".", edited, "--set", "epochs=2", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, f"edit {edited}: done\n"), done.stderr
    deadline = time.monotonic() + 60
    while len(attempts(run_dir, edited)) < 2 or (run_dir / "control.json").exists():
        assert time.monotonic() < deadline, "the edited job ran again, and its engine ended"
        time.sleep(0.2)
    after = rows(tmp_path)
    row = next(r for r in after if r["params"] == best["params"])
    assert row["commands_differ"] and not row["metrics"]["val_acc"]["best"]
    assert sorted(g["jobs"] for g in row["commands"]) == sorted([[edited], [best["jobs"][1]]])
    assert best_row(after) != row  # another row, of like runs, may be best; never this one
    table = eq("results", "m.yaml", cwd=tmp_path).stdout
    line = next(x for x in table.splitlines() if x.startswith("main") and
                f" {best['params']['lr']} " in x)
    assert "commands differ: seed=1 | seed=2; not ranked" in line and " *" not in line

    # the manifest changes every command after the jobs completed: the dry run says which
    (tmp_path / "m.yaml").write_text(MANIFEST.format(epochs=4))
    plan = json.loads(eq("m.yaml", "--dry-run", "--json", cwd=tmp_path).stdout)
    others = sorted(j for r in before for j in r["jobs"] if j != edited)
    assert sorted(plan["changed_since_completed"]) == others  # the edited one keeps its edit
    assert plan["rerun_changed"] == "eq-tui m.yaml --rerun-changed"
    text = eq("m.yaml", "--dry-run", cwd=tmp_path).stdout
    assert f"{len(others)} completed job(s) ran a command the manifest has changed since" in text
    assert "eq-tui m.yaml --rerun-changed" in text
    rerun = eq("m.yaml", "--no-ui", "--rerun-changed", cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"running {len(others)} completed job(s) again" in rerun.stderr
    for job in others:
        assert attempts(run_dir, job)[-1].endswith("--epochs 4 --epoch-seconds 0.05 --mem 500")
        assert len(attempts(run_dir, job)) == 2
    final = {tuple(r["params"].items()): r["commands_differ"] for r in rows(tmp_path)}
    assert final == {(("lr", lr),): lr == best["params"]["lr"]
                     for lr in ("0.1", "0.01", "0.001")}
    assert "no completed job ran a command" in eq("m.yaml", "--no-ui", "--rerun-changed",
                                                  cwd=tmp_path).stderr
