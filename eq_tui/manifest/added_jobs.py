"""The per-job keys of a phase that a job added at run time inherits (`AddedJobDefaults`):
those whose text needs no grid variable, so an added job is watched, checked and read like
the jobs written in its phase."""

from __future__ import annotations

from collections.abc import Callable

from eq_tui.manifest.expand import UndefinedVariable, substitute
from eq_tui.manifest.jobs import Scope
from eq_tui.manifest.model import (
    METRICS_FILE_KEYS,
    AddedJobDefaults,
    MetricsSpec,
    Precondition,
)


def added_job_defaults(scope: Scope) -> AddedJobDefaults:
    left_out: list[str] = []

    def plain(text: str, key: str) -> str | None:
        try:
            return substitute(text, {})
        except UndefinedVariable as exc:
            left_out.append(f"{key} (uses ${{{exc.name}}})")
            return None

    output_check = plain(scope.output_check, "output_check") \
        if scope.output_check is not None else None
    preconditions = []
    for i, at in enumerate(scope.preconditions):
        path = plain(at.precondition.path, f"preconditions[{i}]")
        if path is not None:
            preconditions.append(Precondition(type=at.precondition.type, path=path))
    return AddedJobDefaults(output_check=output_check, preconditions=tuple(preconditions),
                            metrics=_metrics(scope.metrics, plain),
                            stall_after=scope.stall_after, on_stall=scope.on_stall,
                            gpus_per_job=scope.gpus_per_job, mem_mib=scope.sharing.mem_mib,
                            exclusive=scope.sharing.exclusive, priority=scope.priority,
                            left_out=tuple(left_out), **scope.preemption.fields())


def _metrics(spec: MetricsSpec | None,
             plain: Callable[[str, str], str | None]) -> MetricsSpec | None:
    if spec is None:
        return None
    files: dict[str, str] = {}
    for key in METRICS_FILE_KEYS:  # every path, as for the jobs written in the phase
        value = getattr(spec, key)
        if value is not None:
            path = plain(value, f"metrics.{key}")
            if path is None:
                return None  # half a metrics spec would read the wrong files
            files[key] = path
    return MetricsSpec(**{**spec.__dict__, **files})
