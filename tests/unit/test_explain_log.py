"""`eq-tui explain-log`: what is read from a real stack's log, line by line, and what a sweep's
manifest would miss."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from eq_tui.cli.main import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "stacks"


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["explain-log", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_keras_log_its_stack_reports_nan_and_progress(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = explain(capsys, str(FIXTURES / "keras3_2.log"))
    assert code == 0
    assert "stack keras3 recognised" in out
    # the summary row: val_loss reported once per epoch (3), nan first on line 4
    row = next(line for line in out.splitlines() if line.startswith("val_loss "))
    assert row.split()[1:3] == ["3", "3"] and row.split()[3] == "nan" and row.endswith("4")
    assert "progress: 100% at the end (epoch 3/3" in out


def test_redraws_are_shown_apart_from_reports(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    bar = "Epoch {e}: {p:3d}%|#| {n}/10 [00:01<00:00, 9.1it/s, v_num=0{post}]"
    text = "\r".join(bar.format(e=e, p=n * 10, n=n, post=post)
                     for e, post in ((0, ""), (1, ", val_loss=0.500"), (2, ", val_loss=nan.0"))
                     for n in range(1, 11))
    log.write_text(text.replace(", val_loss=0.500]", "]", 1) + "\n")
    code, out, _ = explain(capsys, str(log), "--all")
    assert code == 0
    assert out.count("report val_loss") == 2 and "redraw val_loss=0.5 (repeats" in out
    assert "val_loss is nan" in out


def test_the_manifest_s_metrics_that_the_log_never_prints(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    manifest = tmp_path / "sweep.yaml"
    manifest.write_text(textwrap.dedent("""\
        project: p
        hosts: [{name: sim, simulate: {gpus: 1}}]
        goal: {val_accuracy: max}
        early_stop: {metric: eval_test_accuracy, goal: max}
        jobs:
          - {id: a, cmd: "python train.py --num_train_epochs 3"}
        """))
    code, out, _ = explain(capsys, str(FIXTURES / "hf_1.log"), str(manifest))
    assert code == 0
    warnings = [line for line in out.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1, warnings  # the early_stop metric is there: no word of it
    assert "goal (max) metric 'val_accuracy' is never read" in warnings[0]
    assert "eval_test_accuracy" in warnings[0]  # what was read instead


def test_bad_input_is_a_message_not_a_traceback(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    code, _, err = explain(capsys, str(tmp_path / "missing.log"))
    assert code == 2 and "cannot read" in err and "Traceback" not in err
    junk = tmp_path / "junk.log"
    junk.write_bytes(os.urandom(1 << 16) + b"\n" + b"loss=0.5 " + b"x" * (1 << 20) + b"\n")
    code, out, _ = explain(capsys, str(junk))
    assert code == 0 and "lines read" in out
    manifest = tmp_path / "m.yaml"
    manifest.write_text("project: p\njobs: [{id: a, cmd: x}]\n")
    code, _, err = explain(capsys, str(junk), str(manifest), "--job", "b")
    assert code == 2 and "no job 'b'" in err
