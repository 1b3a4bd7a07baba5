"""Metrics out of the text of a job's files and log. Pure; malformed input never raises.

A `Metrics` maps each metric name to its series (in the order written); the final value is the
series' last. NaN and ±inf are kept as floats (a diverged loss says something); stats and JSON
output decide what to do with them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from eq_tui.hosts.logclean import clean_line
from eq_tui.results.stacks import IGNORED_KEYS, LineRead, Reports, number_text, read_line

Metrics = dict[str, list[float]]

MAX_KEYS = 256  # a file with thousands of numeric leaves is not a metrics file
# numbers a training log prints that are not results
IGNORED_LOG_KEYS = IGNORED_KEYS


def number(value: Any) -> float | None:
    """A JSON or CSV value as a float: numbers and numeric strings; never booleans."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > 64:
            return None
        try:
            return float(text)
        except ValueError:
            return None
    return None


def flatten(data: Any, prefix: str = "", out: dict[str, float] | None = None) -> dict[str, float]:
    """Every numeric leaf of a JSON value under its dotted key (`val.acc`, `per_class.0`)."""
    out = {} if out is None else out
    stack: list[tuple[str, Any]] = [(prefix, data)]
    while stack and len(out) < MAX_KEYS:
        key, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{key}.{k}" if key else str(k), v)
                         for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((f"{key}.{i}" if key else str(i), v)
                         for i, v in reversed(list(enumerate(value))))
        elif key and not isinstance(value, str):
            found = number(value)
            if found is not None:
                out[key] = found
    return out


def add_values(metrics: Metrics, values: dict[str, float]) -> None:
    """Each value onto its metric's series (at most MAX_KEYS metrics)."""
    for key, value in values.items():
        if key in metrics or len(metrics) < MAX_KEYS:
            metrics.setdefault(key, []).append(value)


def json_or_none(text: str) -> Any:
    """A JSON text's value; None for one that is not JSON (or nested past recursion)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def parse_json(text: str, *, skip_private: bool = False) -> Metrics:
    """One JSON document: each numeric leaf is a metric with one value. `skip_private` drops
    top-level keys starting with `_` (wandb-summary.json's `_runtime`, `_step`, `_wandb`)."""
    data = json_or_none(text)
    if skip_private and isinstance(data, dict):
        data = {k: v for k, v in data.items() if not str(k).startswith("_")}
    return {key: [value] for key, value in flatten(data).items()}


def parse_jsonl(text: str) -> Metrics:
    """One JSON object per line: the series of each key, in line order. Lines that are not
    JSON objects (a partly written last line, a header) are skipped."""
    metrics: Metrics = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        data = json_or_none(line)
        if isinstance(data, dict):
            add_values(metrics, flatten(data))
    return metrics


def parse_csv(text: str) -> Metrics:
    """A header row, then one row per logging step, cells empty where a metric was not logged
    at that step (PyTorch Lightning's CSVLogger `metrics.csv`). Rows of the wrong width are
    skipped."""
    rows = csv.reader(io.StringIO(text.replace("\0", "")))
    try:
        header = [name.strip() for name in next(rows)]
    except (StopIteration, csv.Error):
        return {}
    metrics: Metrics = {}
    try:
        for row in rows:
            if len(row) != len(header):
                continue
            add_values(metrics, {name: value for name, cell in zip(header, row, strict=True)
                           if name and (value := number(cell)) is not None})
    except csv.Error:
        pass
    return metrics


def log_numbers(line: str) -> dict[str, float]:
    """The metrics one log line prints, read by the stack that printed it (`stacks.py`):
    `epoch 3/10 loss=0.41 acc: 0.9`, an HF Trainer dict, a Lightning or Keras bar, ..."""
    return read_line(line).metrics


def log_lines(text: str) -> Iterator[str]:
    """A log's lines as a terminal prints them: a progress bar's `\r` ends a line too; ANSI
    escapes and other control bytes (Keras's `\b` redraws) are dropped."""
    for raw in text.split("\n"):
        for part in raw.split("\r"):
            if part:
                yield clean_line(part)


def read_log_line(line: str, pattern: re.Pattern[str] | None = None) -> LineRead:
    """A line as `metrics:` reads it: its `pattern:`'s named groups, else the stack's reader.
    A pattern's figures keep the line's position and whether it is a bar's redraw."""
    read = read_line(line)
    if pattern is None:
        return read
    return replace(read, metrics=pattern_numbers(line, pattern), partial=False)


def pattern_numbers(line: str, pattern: re.Pattern[str]) -> dict[str, float]:
    """The named groups of `pattern` that matched a number in the line."""
    match = pattern.search(line[:4096])
    if match is None:
        return {}
    return {name: value for name, text in match.groupdict().items()
            if text is not None and (value := _number_or_spelling(text)) is not None}


def _number_or_spelling(text: str) -> float | None:
    value = number(text)
    return value if value is not None else number_text(text)


def parse_log(lines: Iterable[str], pattern: re.Pattern[str] | None = None) -> Metrics:
    """The series of each metric the log's lines print, one value per evaluation: a bar's
    redraws repeat a value, they do not report it again (`stacks.Reports`)."""
    metrics: Metrics = {}
    reports = Reports()
    for raw in lines:
        for line in log_lines(raw):
            add_values(metrics, reports.new(read_log_line(line, pattern)))
    return metrics


def merge(*sources: Metrics) -> Metrics:
    """The first source that has a metric gives it (files are named before the log)."""
    merged: Metrics = {}
    for source in sources:
        for key, series in source.items():
            if key not in merged and series:
                merged[key] = series
    return merged


def finals(metrics: Metrics) -> dict[str, float]:
    return {key: series[-1] for key, series in metrics.items() if series}


def bounded(series: list[float], limit: int) -> list[float]:
    """At most `limit` points, evenly spaced over the series, its first and last kept."""
    if len(series) <= limit or limit < 2:
        return list(series[-limit:]) if limit >= 1 else []
    last = len(series) - 1
    return [series[round(i * last / (limit - 1))] for i in range(limit)]


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
