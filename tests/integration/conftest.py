"""The folder is the marker: every test collected from tests/integration/ is an `integration`
test (real screen/tmux sessions, sshd, Slurm, engines and the simulator's programs as
processes), whether or not its module says so (tests/unit/test_folders_and_markers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)
