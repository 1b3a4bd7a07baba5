"""The results settings a run dir records (manifest.json: goals and group_over, top level and
per phase), for a reader that has no manifest object."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eq_tui.manifest.model import Manifest


@dataclass(frozen=True)
class ResultSettings:
    goals: dict[str, str] = field(default_factory=dict)
    group_over: str = "seed"


def _pairs(raw: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(raw, list):
        for item in raw:
            if isinstance(item, (list, tuple)) and len(item) == 2:
                out[str(item[0])] = str(item[1])
    elif isinstance(raw, dict):
        out = {str(k): str(v) for k, v in raw.items()}
    return out


def from_manifest_json(data: Any) -> ResultSettings:
    if not isinstance(data, dict):
        return ResultSettings()
    top: dict[str, Any] = data["results"] if isinstance(data.get("results"), dict) else {}
    goals = _pairs(top.get("goal"))
    for phase in data.get("phases") or []:
        if isinstance(phase, dict) and isinstance(phase.get("results"), dict):
            goals.update(_pairs(phase["results"].get("goal")))
    return ResultSettings(goals=goals, group_over=str(top.get("group_over") or "seed"))


def from_manifest(manifest: Manifest) -> ResultSettings:
    goals: dict[str, str] = dict(manifest.results.goal)
    for phase in manifest.phases:
        goals.update(dict(phase.results.goal))
    return ResultSettings(goals=goals, group_over=manifest.results.group_over)


def read_settings(run_dir: Path) -> ResultSettings:
    try:
        return from_manifest_json(json.loads((run_dir / "manifest.json").read_text()))
    except (OSError, ValueError):
        return ResultSettings()
