"""A run refused before it starts leaves nothing behind: not its run dir, nor the
experiment_queue/ folder a first run would have made (issue 46)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eq_tui.cli.main import main


def test_a_refused_first_run_leaves_no_experiment_queue(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("project: p\nhosts: [{name: sim, simulate: {gpus: 1}}]\n"
                        "jobs: [{id: a, cmd: 'no-such-trainer --lr 1'}]\n")
    assert main([str(manifest), "--no-ui"]) == 3
    assert "`no-such-trainer` not found" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml"]


def test_a_refused_run_beside_earlier_ones_leaves_their_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    earlier = tmp_path / "experiment_queue" / "other"
    earlier.mkdir(parents=True)
    manifest = tmp_path / "m.yaml"
    manifest.write_text("project: p\nhosts: [{name: sim, simulate: {gpus: 1}}]\n"
                        "jobs: [{id: a, cmd: 'no-such-trainer --lr 1'}]\n")
    assert main([str(manifest), "--no-ui"]) == 3
    capsys.readouterr()
    assert [p.name for p in (tmp_path / "experiment_queue").iterdir()] == ["other"]
