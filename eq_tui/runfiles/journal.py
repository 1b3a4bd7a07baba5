"""The state journal: the job records (and top-level fields) changed since the state file was
last written whole, one JSON line per write.

    {"gen": 7, "set": {"updated": 1767000000.5}, "jobs": [{"id": "s1", "status": "running", ...}]}

A line belongs to the state file whose `generation` is `gen`. Compaction writes the state file
with a new generation and only then empties the journal, so lines a crash left behind in
between carry an older generation and are ignored. Each job record is whole, so replaying is
replacing records by id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def encode_line(generation: int, field_texts: Mapping[str, str], job_texts: Iterable[str]) -> bytes:
    """One journal line from already-serialised fields and job records."""
    fields = ", ".join(f"{json.dumps(key)}: {text}" for key, text in field_texts.items())
    jobs = ", ".join(job_texts)
    return f'{{"gen": {generation}, "set": {{{fields}}}, "jobs": [{jobs}]}}\n'.encode()


@dataclass
class Replayed:
    applied: int = 0  # lines applied to the state
    newest_generation: int = 0  # the highest generation any readable line carries


def _parse(raw: bytes) -> tuple[int, dict[str, Any], list[dict[str, Any]]] | None:
    try:
        line = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(line, dict):
        return None
    generation, fields, jobs = line.get("gen"), line.get("set"), line.get("jobs")
    if not isinstance(generation, int) or not isinstance(fields, dict) \
            or not isinstance(jobs, list) or not all(isinstance(job, dict) and "id" in job
                                                     for job in jobs):
        return None
    return generation, fields, jobs


def replay(state: dict[str, Any], path: Path) -> Replayed:
    """Apply the journal at `path` to `state` (a loaded state file) in place.

    Lines of the state's generation are applied whole, so `updated` becomes the time of the
    last one. Lines of an older generation were compacted into the state already: ignored.
    Lines of a newer generation mean the state is an older copy (recovered from
    queue_state.prev.json): their job records are still the newest known, so they are
    applied, but `updated` keeps the copy's time — what happened between the copy and those
    lines is not in the journal (launches are replayed from events.jsonl from that time).
    Reading stops at the first line that does not parse: a crash cut it off mid-write.
    """
    result = Replayed()
    base = int(state.get("generation") or 0)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return result
    index: dict[str, int] | None = None
    with handle:
        for raw in handle:
            if not raw.strip():
                continue
            parsed = _parse(raw)
            if parsed is None:
                break
            generation, fields, jobs = parsed
            result.newest_generation = max(result.newest_generation, generation)
            if generation < base:
                continue
            if generation > base:
                fields = {key: value for key, value in fields.items() if key != "updated"}
            state.update({key: value for key, value in fields.items()
                          if key not in ("jobs", "generation")})
            if index is None:
                index = {str(job.get("id")): i for i, job in enumerate(state["jobs"])
                         if isinstance(job, dict)}
            for job in jobs:
                position = index.get(str(job["id"]))
                if position is None:
                    index[str(job["id"])] = len(state["jobs"])
                    state["jobs"].append(job)
                else:
                    state["jobs"][position] = job
            result.applied += 1
    return result
