"""Several manifests on one command line run side by side, each with its own run dir."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

MANIFEST = """\
project: {name}
hosts: [{{name: {name}-sim, simulate: {{gpus: 1}}}}]
jobs:
  - {{id: a, cmd: "fake-train --epochs 1 --epoch-seconds 0.1 --mem 100"}}
  - {{id: b, cmd: "fake-train --epochs 1 --epoch-seconds 0.1 --mem 100 --seed 1"}}
"""


def test_two_manifests_side_by_side(tmp_path: Path) -> None:
    paths = []
    for name in ("first", "second"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(MANIFEST.format(name=name))
        paths.append(str(path))
    result = subprocess.run([sys.executable, "-m", "eq_tui", *paths, "--no-ui", "--poll", "0.2"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[first]" in result.stdout and "[second]" in result.stdout
    for name in ("first", "second"):
        state = json.loads((tmp_path / "experiment_queue" / name / "queue_state.json")
                           .read_text())
        assert [j["status"] for j in state["jobs"]] == ["completed", "completed"]
    same = subprocess.run([sys.executable, "-m", "eq_tui", paths[0], paths[0], "--no-ui"],
                          capture_output=True, text=True, timeout=60)
    assert same.returncode == 2 and "share a run dir" in same.stderr
