"""results.jsonl: one record per job (id, phase, grid parameters, attempt, status, the command
it ran, final metrics, a bounded series per metric). Building a record and reading the file;
the engine writes it."""

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


def point(value: float) -> float | None:
    """A series point: 6 significant digits are plenty for a curve (and keep the file small)."""
    return float(f"{value:.6g}") if math.isfinite(value) else None


def make_record(*, job_id: str, phase: str, params: dict[str, str], attempt: int, status: str,
                metrics: Metrics, sources: Iterable[str] = (), collected_at: float | None = None,
                cmd: str | None = None) -> Record:
    """`cmd`: the command the attempt ran (a table tells rows of unlike runs by it)."""
    return {
        "id": job_id, "phase": phase, "params": dict(params), "attempt": attempt,
        "status": status, "cmd": cmd,
        "metrics": {key: json_number(series[-1]) for key, series in metrics.items() if series},
        "sources": list(sources), "collected_at": collected_at,
        # last in the line: a reader that needs no curve skips it (loads(series=False))
        "series": {key: [point(v) for v in bounded(series, SERIES_POINTS)]
                   for key, series in metrics.items() if series},
    }


def dumps(records: Iterable[Record]) -> str:
    return "".join(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
                   for record in records)


_SERIES = ',"series":'


def _decode(line: str, series: bool) -> Any:
    if not series:
        # the series is the record's last key: cut it off rather than parse every point
        cut = line.rfind(_SERIES)
        if cut > 0:
            try:
                return json.loads(line[:cut] + "}")
            except ValueError:
                pass  # a key that looked like it: parse the whole line
    return json.loads(line)


def loads(text: str, *, series: bool = True) -> list[Record]:
    """The records of a results.jsonl text; a line that is not a record is skipped. Without
    `series` the curves are left out (a table needs only the final values)."""
    records: list[Record] = []
    for line in text.splitlines():
        try:
            data = _decode(line, series)
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


def read_records(run_dir: Path, *, series: bool = True) -> list[Record] | None:
    """The run dir's records; None when it has no results.jsonl."""
    try:
        text = (run_dir / RESULTS_FILE).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    return loads(text, series=series)
