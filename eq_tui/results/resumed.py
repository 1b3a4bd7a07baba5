"""The series of a job whose attempt resumed from a checkpoint: what the attempts before it
reported up to where it resumed, then its own (issue 44: results continue from the resumed
position). The attempt's own files and log hold only the epochs it ran itself.

Where both carry a position series (`epoch`, `step`, ...: a results.jsonl row's), the carried
points at or past the resumed attempt's first position go (it reports them again); without a
position all stay, as early stopping keeps its carried reports (tick/early_stop.py): a resume
from the newest checkpoint, one saved per evaluation, goes on right after the last one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from eq_tui.results.parse import Metrics

POSITIONS = ("epoch", "step", "global_step", "_step", "trainer/global_step")


def _values(series: Sequence[float | None]) -> list[float]:
    """A record's points as numbers (it writes NaN and infinity as null)."""
    return [math.nan if v is None else float(v) for v in series]


def _keep(carried: Mapping[str, list[float]], own: Metrics) -> tuple[str, int] | None:
    """The position series both have, and how many carried points come before the resumed
    attempt's first position (None: no common position)."""
    for key in POSITIONS:
        mine, theirs = own.get(key), carried.get(key)
        if mine and theirs:
            return key, next((i for i, at in enumerate(theirs) if at >= mine[0]),
                             len(theirs))
    return None


def continued(carried: Mapping[str, Sequence[float | None]], own: Metrics) -> Metrics:
    """`carried`: the series of the attempt(s) the resumed one went on from (the job's last
    record's); `own`: the resumed attempt's. A metric the resumed attempt does not report
    keeps its carried series; one not aligned with the position (another length) keeps all
    of its carried points."""
    before = {key: _values(series) for key, series in carried.items()}
    cut = _keep(before, own)
    out: Metrics = {}
    for key in [*before, *(k for k in own if k not in before)]:
        points = before.get(key, [])
        if cut is not None and len(points) == len(before[cut[0]]):
            points = points[:cut[1]]
        out[key] = points + list(own.get(key, []))
    return out
