"""A person's changes of early stopping for the rest of the run (`eq-tui edit RUN_DIR
--early-stop ...`), by phase. Kept in the state file and applied to the manifest again when
the engine starts over the run (the manifest file still says what it said); a reload of the
file leaves them as the person set them unless --force."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from eq_tui.manifest.model import EarlyStopSpec, Manifest


def with_phase_early_stop(manifest: Manifest, phase: str,
                          spec: EarlyStopSpec | None) -> Manifest:
    return replace(manifest, phases=tuple(
        replace(p, results=replace(p.results, early_stop=spec)) if p.name == phase else p
        for p in manifest.phases))


def _spec(data: Any) -> EarlyStopSpec | None:
    return EarlyStopSpec(**data) if isinstance(data, dict) else None


def _json(spec: EarlyStopSpec | None) -> dict[str, Any] | None:
    return asdict(spec) if spec is not None else None


class EarlyStopEdits:
    def __init__(self) -> None:
        # phase -> (its setting now, None: off; the manifest's before the person changed it)
        self.by_phase: dict[str, tuple[EarlyStopSpec | None, EarlyStopSpec | None]] = {}

    def set(self, manifest: Manifest, phase: str, spec: EarlyStopSpec | None) -> Manifest:
        """The manifest with `phase`'s early_stop now `spec`, recorded as a person's."""
        before = self.by_phase.get(phase, (None, manifest.phase(phase).results.early_stop))[1]
        self.by_phase[phase] = (spec, before)
        return with_phase_early_stop(manifest, phase, spec)

    def manifests(self, phase: str, manifest: Manifest) -> EarlyStopSpec | None:
        """What the manifest file says for `phase` (before a person changed it)."""
        if phase in self.by_phase:
            return self.by_phase[phase][1]
        return manifest.phase(phase).results.early_stop

    def forget(self, phase: str) -> None:
        """The phase follows its manifest again (`on`, or a forced reload)."""
        self.by_phase.pop(phase, None)

    def apply(self, manifest: Manifest) -> Manifest:
        """After a restart: the manifest with the person's settings again."""
        names = {p.name for p in manifest.phases}
        for phase, (spec, _before) in self.by_phase.items():
            if phase in names:
                manifest = with_phase_early_stop(manifest, phase, spec)
        return manifest

    def to_json(self) -> dict[str, Any]:
        return {phase: {"now": _json(now), "manifest": _json(before)}
                for phase, (now, before) in self.by_phase.items()}

    def restore(self, data: Any) -> None:
        self.by_phase = {}
        for phase, entry in (data or {}).items() if isinstance(data, dict) else ():
            if isinstance(entry, dict):
                self.by_phase[str(phase)] = (_spec(entry.get("now")),
                                             _spec(entry.get("manifest")))
