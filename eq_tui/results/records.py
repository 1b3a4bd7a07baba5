"""results.jsonl: one record per job (id, phase, grid parameters, attempt, status, final metrics,
a bounded series per metric). Building a record and reading the file; the engine writes it."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from eq_tui.results.parse import Metrics, bounded

RESULTS_FILE = "results.jsonl"
SERIES_POINTS = 64  # per metric and job: enough for a sparkline and a curve's shape

Record = dict[str, Any]


def json_number(value: float) -> float | None:
    """JSON has no NaN or infinity: they are written as null (and read back as missing)."""
    return value if math.isfinite(value) else None


def make_record(*, job_id: str, phase: str, params: dict[str, str], attempt: int, status: str,
                metrics: Metrics, sources: Iterable[str] = (), collected_at: float | None = None
                ) -> Record:
    return {
        "id": job_id, "phase": phase, "params": dict(params), "attempt": attempt,
        "status": status,
        "metrics": {key: json_number(series[-1]) for key, series in metrics.items() if series},
        "series": {key: [json_number(v) for v in bounded(series, SERIES_POINTS)]
                   for key, series in metrics.items() if series},
        "sources": list(sources), "collected_at": collected_at,
    }


def dumps(records: Iterable[Record]) -> str:
    return "".join(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
                   for record in records)


def loads(text: str) -> list[Record]:
    """The records of a results.jsonl text; a line that is not a record is skipped."""
    records: list[Record] = []
    for line in text.splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("id"), str):
            data.setdefault("phase", "main")
            data["params"] = {str(k): str(v) for k, v in (data.get("params") or {}).items()} \
                if isinstance(data.get("params"), dict) else {}
            data["metrics"] = data.get("metrics") if isinstance(data.get("metrics"), dict) \
                else {}
            records.append(data)
    return records


def read_records(run_dir: Path) -> list[Record] | None:
    """The run dir's records; None when it has no results.jsonl."""
    try:
        text = (run_dir / RESULTS_FILE).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    return loads(text)
