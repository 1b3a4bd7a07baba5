"""What every attempt of a finished run must show of its times: both ends set, the end not
before the start, and the start the one its wrapper recorded on the host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def recorded_start(attempt: dict[str, Any]) -> float:
    return float((Path(attempt["attempt_dir"]) / "start").read_text().strip())


def assert_host_times(jobs: list[dict[str, Any]]) -> None:
    """`jobs`: the state file's jobs, each attempt's dir readable from here."""
    attempts = [a for j in jobs for a in j["history"] if a["launched"]]
    assert attempts
    for attempt in attempts:
        where = f"{attempt['session']}: {attempt}"
        assert attempt["start"] is not None and attempt["end"] is not None, where
        assert attempt["end"] >= attempt["start"], where
        assert attempt["start"] == pytest.approx(recorded_start(attempt), abs=1e-6), where
