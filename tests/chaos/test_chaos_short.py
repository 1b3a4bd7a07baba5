"""The short chaos run (the long one: `python -m tests.chaos.chaos --json`)."""

import json
from typing import Any

import pytest

from tests.chaos.chaos import run

pytestmark = pytest.mark.integration
# its jobs' mix and fault schedule (tests/chaos/schedule.py), one whose first seven faults are
# of all seven kinds; a failure replays with the command the test prints
SEED = 210
JOBS = 40


def safe(n_jobs: int) -> dict[str, Any]:
    """One run, and what must hold of every run, whatever it proved."""
    print(f"replay: .venv/bin/python -m tests.chaos.chaos --jobs {n_jobs} --faults short "
          f"--seed {SEED}")
    report = run(n_jobs, "short", seed=SEED).to_json()
    assert report["seed"] == SEED
    print(json.dumps(report, indent=1))
    assert report["evidence_needed"] == {"faults_effective": 6, "kinds": 4}
    for key in ("duplicate_launches", "overlaps_released", "lost", "completed_unverified",
                "stuck_unverified", "wrong_status", "left_running", "retried_unexplained",
                "double_bookings", "restarts_wrong", "final_metric_mismatches"):
        assert report[key] == 0, (key, report["details"])
    assert report["launches"] >= report["jobs"]
    return report


def test_short_chaos_run_loses_nothing_and_runs_nothing_twice() -> None:
    report = safe(JOBS)
    if not report["enough_evidence"]:
        # a loaded machine injects the faults more slowly (an engine killed mid-command takes
        # its time to come back) while the jobs keep their pace: the queue ended before enough
        # faults had an effect, so the run proved too little. The same faults over a queue
        # twice as long; a run that proves nothing never passes
        report = safe(2 * JOBS)
    assert report["enough_evidence"], \
        "the faults must have had an effect, on running jobs, for the run to prove anything"
    assert report["ok"]
    # another user's engine came mid-run and its jobs ran beside ours, never on our GPUs
    assert report["faults_effective_by_kind"].get("second_engine") == 1
    assert report["second_engine_runs"] >= 8
