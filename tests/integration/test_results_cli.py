"""`eq-tui results RUN_DIR` in every format, and its errors."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from eq_tui.cli.main import main
from eq_tui.results.records import dumps, make_record


def write_run(run_dir: Path) -> Path:
    run_dir.mkdir()
    records = []
    for lr, accs in (("0.1", [0.70, 0.72, 0.74]), ("0.03", [0.80, 0.84, None])):
        for seed, acc in enumerate(accs, 1):
            status = "completed" if acc is not None else "stuck"
            metrics = {"val_acc": [0.5, acc], "loss": [1.0, 1 - acc]} if acc else {}
            records.append(make_record(job_id=f"lr{lr}_s{seed}", phase="train",
                                       params={"lr": lr, "wd": "0", "seed": str(seed)},
                                       attempt=1, status=status, metrics=metrics))
    (run_dir / "results.jsonl").write_text(dumps(records))
    (run_dir / "manifest.json").write_text(json.dumps(
        {"results": {"goal": [["val_acc", "max"]], "group_over": "seed", "on_complete": None},
         "phases": [{"name": "train", "results": {"goal": [["loss", "min"]]}}]}))
    return run_dir


def results(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["results", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = results(capsys, str(write_run(tmp_path / "run")))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:6] == ["phase", "lr", "wd", "n", "val_acc", "(↑)"]
    assert "0.720 ± 0.020" in lines[2] and "3/3" in lines[2]
    assert "0.820 ± 0.028 *" in lines[3] and "2/3" in lines[3]
    assert "missing seed=3 (stuck)" in lines[3]
    assert lines[-1].startswith("* best of its phase")


def test_without_a_goal_the_table_says_how_to_mark_the_best(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "run")
    (run / "manifest.json").write_text(json.dumps(
        {"results": {"goal": [], "group_over": "seed", "on_complete": None}}))
    code, out, _ = results(capsys, str(run))
    assert code == 0 and " *" not in out
    assert out.splitlines()[-1] == ("no best marked: no metric has a goal; `goal: {val_acc: max}` "
                                    "(or min) in the manifest marks each phase's best")


def test_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = results(capsys, str(write_run(tmp_path / "run")), "--format", "markdown")
    assert code == 0
    assert out.splitlines()[0] == ("| phase | lr | wd | n | val_acc (↑) | min..max | loss (↓) | "
                                   "min..max | notes |")
    assert ("| train | 0.03 | 0 | 2/3 | **0.820 ± 0.028** | 0.8..0.84 | **0.180 ± 0.028** | "
            "0.16..0.2 | missing seed=3 (stuck) |") in out


def test_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = results(capsys, str(write_run(tmp_path / "run")), "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["lr"] for r in rows] == ["0.1", "0.03"]
    assert float(rows[0]["val_acc_mean"]) == pytest.approx(0.72)
    assert rows[1]["val_acc_n"] == "2" and rows[1]["expected"] == "3"
    assert rows[1]["best"] == "loss val_acc" and rows[1]["missing"] == "seed=3 (stuck)"


def test_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = results(capsys, str(write_run(tmp_path / "run")), "--format", "json",
                           "--metric", "val_acc")
    assert code == 0
    data = json.loads(out)
    assert data["metrics"] == ["val_acc"] and data["goals"] == {"val_acc": "max",
                                                                 "loss": "min"}
    second = data["rows"][1]
    assert second["params"] == {"lr": "0.03", "wd": "0"}
    assert second["metrics"]["val_acc"]["best"] is True
    assert second["metrics"]["val_acc"]["mean"] == pytest.approx(0.82)
    assert second["jobs"] == ["lr0.03_s1", "lr0.03_s2", "lr0.03_s3"]


def test_latex(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = results(capsys, str(write_run(tmp_path / "run")), "--format", "latex")
    assert code == 0
    assert out.startswith(r"\begin{tabular}") and out.rstrip().endswith(r"\end{tabular}")
    assert r"val\_acc ($\uparrow$)" in out
    assert r"\textbf{0.820 $\pm$ 0.028}" in out


def test_group_over_and_by(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = str(write_run(tmp_path / "run"))
    code, out, _ = results(capsys, run_dir, "--group-over", "lr", "--format", "csv")
    assert code == 0 and [r["seed"] for r in csv.DictReader(io.StringIO(out))] == ["1", "2",
                                                                                   "3"]
    code, out, _ = results(capsys, run_dir, "--by", "lr,wd", "--format", "csv")
    assert code == 0 and len(out.splitlines()) == 3
    code, _, err = results(capsys, run_dir, "--by", "wd")
    assert code == 2 and "refusing to average" in err and "differ in lr" in err


def test_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = results(capsys, str(tmp_path / "nowhere"))
    assert code == 3 and "nowhere: no such file or directory" in err
    (tmp_path / "empty").mkdir()
    code, _, err = results(capsys, str(tmp_path / "empty"))
    assert code == 3 and "empty: no eq-tui run here" in err
    (tmp_path / "empty" / "queue_state.json").write_text('{"jobs": []}')
    code, _, err = results(capsys, str(tmp_path / "empty"))
    assert code == 3 and "no results.jsonl yet" in err
    code, _, err = results(capsys, str(tmp_path / "empty"), "--format", "xml")
    assert code == 2 and "invalid choice" in err


def test_the_installed_command(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run")
    result = subprocess.run([sys.executable, "-m", "eq_tui", "results", str(run_dir),
                             "--format", "markdown"], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "**0.820 ± 0.028**" in result.stdout
    help_text = subprocess.run([sys.executable, "-m", "eq_tui", "results", "--help"],
                               capture_output=True, text=True, check=True).stdout
    assert "--group-over" in help_text and "latex" in help_text
