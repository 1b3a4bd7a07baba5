"""The chaos run's fault schedule (tests/chaos/schedule.py): one seed, one schedule, so that a
failing run replays with --seed; jittered, so that faults do not come at a fixed pace."""

from __future__ import annotations

from collections import Counter

from tests.chaos.chaos import SHORT_PLAN
from tests.chaos.schedule import HOLD_S, JITTER, MEAN_GAP_S, fault_schedule

HOSTS = ["alpha", "beta"]


def test_a_seed_replays_its_schedule_and_another_seed_draws_another() -> None:
    first = fault_schedule(11, SHORT_PLAN, HOSTS)
    assert fault_schedule(11, SHORT_PLAN, list(reversed(HOSTS))) == first
    other = fault_schedule(12, SHORT_PLAN, HOSTS)
    assert other != first
    # not only the waits differ: the order of the faults and their targets are drawn too
    assert [f.kind for f in other] != [f.kind for f in first]
    assert [f.host for f in other] != [f.host for f in first]


def test_the_gaps_are_jittered_around_the_mean() -> None:
    gaps = [f.gap_s for f in fault_schedule(7, SHORT_PLAN * 2, HOSTS)]
    assert len(set(gaps)) == len(gaps), gaps
    low, high = (bound * MEAN_GAP_S for bound in JITTER)
    assert all(low <= gap <= high for gap in gaps), gaps
    assert max(gaps) - min(gaps) > (high - low) / 2, gaps


def test_every_planned_fault_comes_once_with_its_hold() -> None:
    for seed in range(20):
        schedule = fault_schedule(seed, SHORT_PLAN, HOSTS)
        assert Counter(f.kind for f in schedule) == Counter(SHORT_PLAN), seed
        assert {f.host for f in schedule} <= set(HOSTS)
        for fault in schedule:
            low, high = HOLD_S.get(fault.kind, (0.0, 0.0))
            assert low <= fault.hold_s <= high, fault
