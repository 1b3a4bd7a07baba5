"""A search's trials over time, the curve researchers look at: each told trial (complete, failed
or pruned) in the order it was told, its value, and the best value so far by the study's
direction. Only complete trials enter the best line: a failed trial has no value, and a pruned
one's (its last reported value, if Optuna kept one) is no result. Drawn in text, the same in a
terminal, in a pipe and on the `R` screen: two rows of bars (values, best so far) on one scale,
and the best so far after a quarter, half, three quarters and all of the trials told.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

BARS = "▁▂▃▄▅▆▇█"
FAILED = "x"
PRUNED = "∘"
WIDTH = 60  # columns of bars at most; more trials share a column
TOLD = ("complete", "fail", "pruned")


@dataclass(frozen=True)
class Told:
    """One trial as the journal has it (state lower-case, as Optuna's TrialState name)."""

    number: int
    state: str
    value: float | None
    ended_at: float | None  # epoch seconds


@dataclass(frozen=True)
class CurvePoint:
    trial: int
    ended_at: float | None
    value: float | None
    best_so_far: float | None  # None until a complete trial was told
    state: str

    def to_json(self) -> dict[str, Any]:
        return {"trial": self.trial, "ended_at": self.ended_at, "value": self.value,
                "best_so_far": self.best_so_far, "state": self.state}


def curve(trials: Iterable[Told], maximize: bool) -> list[CurvePoint]:
    """The told trials in the order told (by when each ended, then by number), with the best
    complete value up to each; trials still running or waiting are left out."""
    told = sorted((t for t in trials if t.state in TOLD),
                  key=lambda t: (math.inf if t.ended_at is None else t.ended_at, t.number))
    best: float | None = None
    points = []
    for trial in told:
        if trial.state == "complete" and trial.value is not None and (
                best is None or (trial.value > best if maximize else trial.value < best)):
            best = trial.value
        points.append(CurvePoint(trial.number, trial.ended_at, trial.value, best, trial.state))
    return points


def checkpoints(count: int) -> list[int]:
    """How many told trials to say the best after: a quarter, half, three quarters, all."""
    return sorted({math.ceil(count * part / 4) for part in (1, 2, 3, 4)} - {0})


def plot(points: Sequence[CurvePoint], maximize: bool, width: int = WIDTH) -> list[str]:
    """The curve in lines of text (none for no told trial)."""
    if not points:
        return []
    values = [p.value for p in points
              if p.state == "complete" and p.value is not None and math.isfinite(p.value)]
    columns = _columns(len(points), width)
    lines = [f"told in order: {len(points)} trials"
             + (f", one bar per {_per(len(points), len(columns))}" if len(columns) < len(points)
                else "")
             + (f"; {BARS[0]} {min(values):.4g} … {BARS[-1]} {max(values):.4g}" if values else "")
             + f"; {FAILED} failed, {PRUNED} pruned"]
    if values:
        low, high = min(values), max(values)
        lines.append("  value  " + "".join(
            _value_bar(points[start:end], maximize, low, high) for start, end in columns))
        lines.append("  best   " + "".join(
            _bar(points[end - 1].best_so_far, low, high) for _, end in columns))
        said = [f"{points[k - 1].best_so_far:.6g} after {k}" for k in checkpoints(len(points))
                if points[k - 1].best_so_far is not None]
        lines.append("  best so far: " + ", ".join(said) + " told")
    else:
        lines.append("  value  " + "".join(
            _value_bar(points[start:end], maximize, 0.0, 0.0) for start, end in columns))
    return lines


def _columns(count: int, width: int) -> list[tuple[int, int]]:
    """Consecutive runs of trials, one per column, covering all `count` in order."""
    shown = min(count, width)
    return [(count * i // shown, count * (i + 1) // shown) for i in range(shown)]


def _per(count: int, columns: int) -> str:
    low, high = count // columns, -(-count // columns)
    return f"{low}" if low == high else f"{low}-{high}"


def _value_bar(points: Sequence[CurvePoint], maximize: bool, low: float, high: float) -> str:
    """A column's bar: its best complete value; no value: x if one failed, else ∘."""
    values = [p.value for p in points if p.state == "complete" and p.value is not None]
    if values:
        return _bar(max(values) if maximize else min(values), low, high)
    return FAILED if any(p.state == "fail" for p in points) else PRUNED


def _bar(value: float | None, low: float, high: float) -> str:
    if value is None:
        return " "
    if math.isnan(value):
        return "?"
    if math.isinf(value):
        return BARS[-1] if value > 0 else BARS[0]
    if high <= low:
        return BARS[-1]
    return BARS[min(len(BARS) - 1, max(0, int((value - low) / (high - low) * len(BARS))))]
