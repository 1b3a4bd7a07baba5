"""The chaos run's fault schedule, drawn before the run from one seed, so that `--seed N`
replays it: the faults in their order, the wait before each, the host each aims at and how
long a cut lasts or how far a clone leads the kill that meets it.

The waits are jittered because a fault at a fixed pace meets the engine at the same point of
its cycle each time and can miss the windows between a decision and its launch."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

MEAN_GAP_S = 2.5  # keeps the short plan's faults inside its 40-job queue's life
JITTER = (0.5, 1.5)  # a gap is uniform in this range times the mean
HOLD_S = {"cut_host": (2.0, 4.0), "command_kill9": (0.0, 0.3)}


@dataclass(frozen=True)
class PlannedFault:
    kind: str
    gap_s: float  # after the previous fault ended (the first: after the engine started)
    host: str  # aimed at; another host is hit when no run of ours is alive on this one
    hold_s: float  # cut_host: time off the network; command_kill9: the clone's lead

    def describe(self) -> str:
        hold = f" hold {self.hold_s:.2f}s" if self.kind in HOLD_S else ""
        return f"{self.kind} +{self.gap_s:.2f}s {self.host}{hold}"


def fault_schedule(seed: int, kinds: Sequence[str], hosts: Sequence[str],
                   mean_gap_s: float = MEAN_GAP_S) -> list[PlannedFault]:
    """`kinds` in an order drawn from `seed` (each as often as given: the verdict's evidence
    needs every kind), each with its gap, host and hold drawn from the same generator."""
    rng = random.Random(seed)
    order = list(kinds)
    rng.shuffle(order)
    targets = sorted(hosts)
    schedule = []
    for kind in order:
        gap = rng.uniform(*JITTER) * mean_gap_s
        host = rng.choice(targets)
        hold = rng.uniform(*HOLD_S.get(kind, (0.0, 0.0)))
        schedule.append(PlannedFault(kind, round(gap, 3), host, round(hold, 3)))
    return schedule
