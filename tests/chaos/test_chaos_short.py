"""The short chaos run (the long one: `python -m tests.chaos.chaos --json`)."""

import json

import pytest

from tests.chaos.chaos import run

pytestmark = pytest.mark.integration
# its jobs' mix and fault schedule (tests/chaos/schedule.py), one whose first seven faults are
# of all seven kinds; a failure replays with the command the test prints
SEED = 210


def test_short_chaos_run_loses_nothing_and_runs_nothing_twice() -> None:
    print(f"replay: .venv/bin/python -m tests.chaos.chaos --jobs 40 --faults short --seed {SEED}")
    verdict = run(40, "short", seed=SEED)
    report = verdict.to_json()
    assert report["seed"] == SEED
    print(json.dumps(report, indent=1))
    assert report["enough_evidence"], \
        "the faults must have had an effect, on running jobs, for the run to prove anything"
    assert report["evidence_needed"] == {"faults_effective": 6, "kinds": 4}
    for key in ("duplicate_launches", "overlaps_released", "lost", "completed_unverified",
                "stuck_unverified", "wrong_status", "left_running", "retried_unexplained",
                "double_bookings"):
        assert report[key] == 0, (key, report["details"])
    assert report["launches"] >= report["jobs"]
    assert report["ok"]
    # another user's engine came mid-run and its jobs ran beside ours, never on our GPUs
    assert report["faults_effective_by_kind"].get("second_engine") == 1
    assert report["second_engine_runs"] >= 8
