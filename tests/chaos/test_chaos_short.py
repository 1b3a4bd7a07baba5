"""The short chaos run (the long one: `python -m tests.chaos.chaos`)."""

import pytest

from tests.chaos.chaos import run

pytestmark = pytest.mark.integration


def test_short_chaos_run_loses_nothing_and_runs_nothing_twice() -> None:
    report = run(40, "short", seed=11)
    print(report.line())
    print("\n".join(report.overlap_details))
    assert sum(report.faults.values()) >= 8 and len(report.faults) >= 5
    assert report.overlap_details == []
    assert report.duplicate_launches == 0 and report.overlaps == 0 and report.lost_jobs == 0
    assert report.wrong_status == [] and report.unaccounted == [] and report.left_running == 0
