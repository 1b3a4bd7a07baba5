"""The job table's metric column: a chosen metric's current value and a sparkline of the values
seen. A running job's numbers come from its last log line (the probe brings it every tick: no
extra round trip), one point per evaluation (a bar's redraw repeats one); a finished job's from
its record's final `metrics`."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from eq_tui.results.stacks import Reports, read_line

POINTS = 12
BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Iterable[float]) -> str:
    points = [v for v in values if math.isfinite(v)]
    if len(points) < 2:
        return ""
    low, high = min(points), max(points)
    if high == low:
        return BARS[0] * len(points)
    return "".join(BARS[round((v - low) / (high - low) * (len(BARS) - 1))] for v in points)


def short(value: float | None) -> str:
    if value is None:
        return "nan"
    return f"{value:.4g}"


class LiveMetrics:
    """Per job (row key): the metrics read from each new last log line, a bounded series each."""

    def __init__(self) -> None:
        self.series: dict[str, dict[str, deque[float]]] = {}
        self._last_line: dict[str, str] = {}
        # a bar's redraw repeats its last value: a curve's point is an evaluation
        self._reports: dict[str, Reports] = {}
        self.current: dict[str, dict[str, float]] = {}  # the latest value each line showed

    def observe(self, key: str, job: Mapping[str, Any]) -> None:
        line = str(job.get("last_line") or "")
        if not line or self._last_line.get(key) == line:
            return
        self._last_line[key] = line
        read = read_line(line)
        if not read.metrics:
            return
        self.current.setdefault(key, {}).update(read.metrics)
        mine = self.series.setdefault(key, {})
        for name, value in self._reports.setdefault(key, Reports()).new(read).items():
            mine.setdefault(name, deque(maxlen=POINTS)).append(value)

    def value(self, key: str, job: Mapping[str, Any], metric: str) -> float | None:
        """The current value: the final one once read, else the last the log printed."""
        final = job.get("metrics") or {}
        if metric in final:
            found = final[metric]
            return float(found) if isinstance(found, (int, float)) else math.nan
        return self.current.get(key, {}).get(metric)

    def cell(self, key: str, job: Mapping[str, Any], metric: str | None) -> str:
        if not metric:
            return ""
        value = self.value(key, job, metric)
        if value is None:
            return ""
        text = short(None if math.isnan(value) else value)
        line = sparkline(self.series.get(key, {}).get(metric, ()))
        return f"{text} {line}" if line else text

    def names(self, jobs: Iterable[Mapping[str, Any]], first: Iterable[str] = ()) -> list[str]:
        """Every metric seen, those in `first` (the goals) ahead."""
        seen: dict[str, None] = {}
        for job in jobs:
            seen.update(dict.fromkeys(job.get("metrics") or {}))
        for mine in self.series.values():
            seen.update(dict.fromkeys(mine))
        ahead = [name for name in first if name in seen]
        return ahead + [name for name in seen if name not in ahead
                        and name not in ("epoch", "step")]
