"""Early stopping's rule: is a job that just made its `step`-th report of the metric a loser?

Pure: the rung tables are the jobs' own reports (`JobState.reports`, kept in the state file),
so an engine restart finds them as they were. A configuration is a job's phase and grid point
less `group_over` (the seed): its value at a report is the mean over its seeds that made that
report, so one unlucky seed does not stop a good configuration.

asha (asynchronous successive halving): the rungs are the reports grace, grace*eta,
grace*eta^2, ...; a job reaching a rung goes on when its configuration is in the best 1/eta of
the configurations already there (the cutoff is the (1 - 1/eta) quantile of theirs, linear
interpolation), is stopped otherwise; the first to reach a rung always goes on. Nothing waits
for a rung to fill.

median: from report `grace` on, at every report, a job is stopped when its configuration is
worse than the median of the other configurations at that same report.

Both judge again as others arrive: a running job whose configuration, at the last rung it
passed (median: the furthest report another configuration has made too), is no longer in the
best 1/eta of (median: better than the median of) the configurations that have reached it
since is stopped too. A job is not kept for being first to a report: a sweep whose worst
configurations start first, or run ahead of the others, would otherwise run them to the end.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from eq_tui.manifest.model import EarlyStopSpec

Config = tuple[str, ...]


@dataclass(frozen=True)
class Entry:
    """One job's reports, for the rung tables."""

    job: str
    config: Config
    reports: Sequence[float]


@dataclass(frozen=True)
class Pruned:
    step: int
    value: float  # its configuration's mean at that report
    seeds: int  # how many of its configuration's jobs that mean is over
    cutoff: float
    rivals: int  # other configurations at that report
    reason: str


def is_rung(spec: EarlyStopSpec, step: int) -> bool:
    """Whether a job is judged at its `step`-th report."""
    if step < spec.grace:
        return False
    if spec.rule == "median":
        return True
    rung = spec.grace
    while rung < step:
        rung *= spec.eta
    return rung == step


def last_rung(spec: EarlyStopSpec, reports: int, reached: int) -> int | None:
    """The report a running job with `reports` reports is judged at again, as others reach it
    (None: none yet). asha: the highest rung it has passed; median: the furthest report it and
    another configuration have both made (`reached`: the most reports another has made)."""
    if spec.rule == "median":
        step = min(reports, reached)
        return step if step >= spec.grace else None
    if reports < spec.grace:
        return None
    rung = spec.grace
    while rung * spec.eta <= reports:
        rung *= spec.eta
    return rung


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default)."""
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    if pos == low or ordered[high] == ordered[low]:
        return ordered[low]  # no interpolation: inf - inf would make a nan cutoff
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def ranked(value: float, goal: str) -> float:
    """A report as the rule compares it: a diverged one (nan) is the worst there is."""
    if math.isnan(value):
        return -math.inf if goal == "max" else math.inf
    return value


def config_values(entries: Iterable[Entry], step: int) -> dict[Config, list[float]]:
    """Each configuration's reports at `step` (its jobs that made that many)."""
    table: dict[Config, list[float]] = {}
    for entry in entries:
        if len(entry.reports) >= step:
            table.setdefault(entry.config, []).append(entry.reports[step - 1])
    return table


def judge(spec: EarlyStopSpec, config: Config, step: int,
          entries: Iterable[Entry]) -> Pruned | None:
    """A job of `config` has just made its `step`-th report: stop it (Pruned, with the reason
    in words) or let it go on (None). `entries`: every job of its phase with reports, itself
    included."""
    if not is_rung(spec, step):
        return None
    table = config_values(entries, step)
    own = table.pop(config, [])
    if not own or not table:
        return None  # nobody else reached this report yet: it goes on
    value = ranked(sum(own) / len(own), spec.goal)
    rivals = [ranked(sum(v) / len(v), spec.goal) for v in table.values()]
    better_high = spec.goal == "max"
    if spec.rule == "median":
        cutoff = quantile(rivals, 0.5)
        how = f"median {cutoff:.4g} of {len(rivals)} other configurations"
    else:
        keep = 1.0 / spec.eta
        cutoff = quantile(rivals, 1.0 - keep if better_high else keep)
        how = f"rung cutoff {cutoff:.4g} (top 1/{spec.eta} of {len(rivals) + 1})"
    losing = value < cutoff if better_high else value > cutoff
    if not losing:
        return None
    seeds = f" (mean of {len(own)} seeds)" if len(own) > 1 else ""
    shown = "nan" if math.isinf(value) and not math.isinf(sum(own)) else f"{value:.4g}"
    reason = f"pruned at report {step}: {spec.metric} {shown}{seeds}, {how}"
    return Pruned(step=step, value=value, seeds=len(own), cutoff=cutoff, rivals=len(rivals),
                  reason=reason)
