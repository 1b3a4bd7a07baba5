"""What every attempt of a finished run must show of its times: both ends set, the end not
before the start, the start the one its wrapper recorded on the host, and the end the host's
record or marked as the engine's where the host had none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def recorded_start(attempt: dict[str, Any]) -> float:
    return float((Path(attempt["attempt_dir"]) / "start").read_text().strip())


def recorded_end(attempt: dict[str, Any]) -> float | None:
    path = Path(attempt["attempt_dir"]) / "end"
    return float(path.read_text().strip()) if path.exists() else None


def assert_host_times(jobs: list[dict[str, Any]]) -> None:
    """`jobs`: the state file's jobs, each attempt's dir readable from here."""
    attempts = [a for j in jobs for a in j["history"] if a["launched"]]
    assert attempts
    for attempt in attempts:
        where = f"{attempt['session']}: {attempt}"
        assert attempt["start"] is not None and attempt["end"] is not None, where
        assert attempt["end"] >= attempt["start"], where
        assert attempt["start"] == pytest.approx(recorded_start(attempt), abs=1e-6), where
        # the end is the host's record, unless marked as the engine's (the host had none)
        ended = recorded_end(attempt)
        assert attempt["end_by_engine"] == (ended is None), where
        if ended is not None:
            assert attempt["end"] == pytest.approx(max(ended, attempt["start"]), abs=1e-6), where
