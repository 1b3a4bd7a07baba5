"""A person's changes to a running search, by phase: its `trials` and GPU-hours budget set with
`eq-tui edit RUN_DIR --search ...`, and a hold on it (`eq-tui hold RUN_DIR --phase P`: it asks
no new trial until released). Kept in the state file; the amounts are applied to the manifest
again when the engine starts over the run (the manifest file still says what it said), and a
reload of the file leaves them as the person set them unless --force."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from eq_tui.manifest.model import Manifest, SearchSpec

Amounts = tuple[int | None, float | None]  # trials, gpu_hours


def with_amounts(manifest: Manifest, phase: str, amounts: Amounts) -> Manifest:
    """The manifest with `phase`'s search asking up to `amounts` (a phase without a search is
    left as it is)."""
    trials, gpu_hours = amounts
    return replace(manifest, phases=tuple(
        replace(p, search=replace(p.search, trials=trials, gpu_hours=gpu_hours))
        if p.name == phase and p.search is not None else p for p in manifest.phases))


def amounts_of(search: SearchSpec) -> Amounts:
    return search.trials, search.gpu_hours


def _amounts(data: Any) -> Amounts | None:
    if not isinstance(data, dict):
        return None
    trials, hours = data.get("trials"), data.get("gpu_hours")
    return (int(trials) if isinstance(trials, int) else None,
            float(hours) if isinstance(hours, (int, float)) else None)


class SearchEdits:
    def __init__(self) -> None:
        # phase -> (the amounts a person set, the manifest file's before they did)
        self.amounts: dict[str, tuple[Amounts, Amounts]] = {}
        self.held: dict[str, str] = {}  # phase -> who held its search

    def set(self, manifest: Manifest, phase: str, amounts: Amounts) -> Manifest:
        """The manifest with `phase`'s search now asking up to `amounts`, recorded as a
        person's."""
        search = manifest.phase(phase).search
        assert search is not None
        before = self.amounts.get(phase, (amounts, amounts_of(search)))[1]
        self.amounts[phase] = (amounts, before)
        return with_amounts(manifest, phase, amounts)

    def manifests(self, phase: str, manifest: Manifest) -> Amounts | None:
        """What the manifest file says for `phase` (before a person changed it)."""
        if phase in self.amounts:
            return self.amounts[phase][1]
        search = manifest.phase(phase).search
        return None if search is None else amounts_of(search)

    def forget(self, phase: str) -> None:
        """The phase's search follows its manifest again (a forced reload)."""
        self.amounts.pop(phase, None)

    def apply(self, manifest: Manifest) -> Manifest:
        """After a restart: the manifest with the person's amounts again."""
        for phase, (amounts, _before) in self.amounts.items():
            manifest = with_amounts(manifest, phase, amounts)
        return manifest

    def to_json(self) -> dict[str, Any]:
        return {"amounts": {phase: {"now": _json(now), "manifest": _json(before)}
                            for phase, (now, before) in self.amounts.items()},
                "held": dict(self.held)}

    def restore(self, data: Any) -> None:
        self.amounts, self.held = {}, {}
        if not isinstance(data, dict):
            return
        for phase, entry in (data.get("amounts") or {}).items():
            now = _amounts(entry.get("now")) if isinstance(entry, dict) else None
            before = _amounts(entry.get("manifest")) if isinstance(entry, dict) else None
            if now is not None and before is not None:
                self.amounts[str(phase)] = (now, before)
        held = data.get("held")
        if isinstance(held, dict):
            self.held = {str(phase): str(by) for phase, by in held.items()}


def _json(amounts: Amounts) -> dict[str, Any]:
    return {"trials": amounts[0], "gpu_hours": amounts[1]}
