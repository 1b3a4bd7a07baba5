"""A search trial's jobs: the trial template with the values Optuna asked put in, once per
point of the grid beside the search. Pure: the engine calls it when a trial is asked."""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from eq_tui.manifest.expand import grid_points
from eq_tui.manifest.model import DEFAULT_PHASE, JobSpec, SearchParam, SearchSpec
from eq_tui.manifest.search_keys import ID_VAR, TRIAL_VAR, marker

_KEEP = ("id", "phase", "params", "family")
_QUOTED = ("cmd", "resume")  # shell text: a value goes in quoted, as for grid values


def value_text(param: SearchParam, value: Any) -> str:
    """How a value Optuna chose is written into a command: choices as written, whole numbers
    of an integer range without a point, floats in Python's shortest exact form."""
    if param.choices:
        return str(value)
    if param.integer:
        return str(int(value))
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{param.name}: {value!r} is not a finite number")
    return repr(number)


def trial_prefix(phase: str, number: int) -> str:
    return f"t{number}" if phase == DEFAULT_PHASE else f"{phase}-t{number}"


def trial_jobs(search: SearchSpec, number: int, values: Mapping[str, str]) -> list[JobSpec]:
    """The jobs of trial `number` with `values` (name -> text, every name of the space)."""
    missing = [p.name for p in search.space if p.name not in values]
    if missing:
        raise ValueError(f"trial {number} has no value for {', '.join(missing)}")
    template = search.trial_job
    prefix = trial_prefix(template.phase, number)
    points = grid_points(dict((k, list(v)) for k, v in search.grid)) if search.grid else [{}]
    jobs = []
    for point in points:
        job_id = prefix + "".join(f"_{k}{v}" for k, v in point.items())
        variables = {**{p.name: values[p.name] for p in search.space}, **point,
                     TRIAL_VAR: str(number), ID_VAR: job_id}
        jobs.append(_fill(template, variables, job_id))
    return jobs


def _fill(template: JobSpec, variables: dict[str, str], job_id: str) -> JobSpec:
    changes: dict[str, Any] = {
        f.name: _fill_value(getattr(template, f.name), variables, quote=f.name in _QUOTED)
        for f in fields(template) if f.name not in _KEEP}
    params = tuple((name, variables[name]) for name, _ in template.params)
    return replace(template, id=job_id, params=params, **changes)


def _fill_value(value: Any, variables: dict[str, str], *, quote: bool) -> Any:
    if isinstance(value, str):
        for name, text in variables.items():
            value = value.replace(marker(name), shlex.quote(text) if quote else text)
        return value
    if isinstance(value, tuple):
        return tuple(_fill_value(item, variables, quote=quote) for item in value)
    if hasattr(value, "__dataclass_fields__"):
        return replace(value, **{f.name: _fill_value(getattr(value, f.name), variables,
                                                     quote=f.name in _QUOTED)
                                 for f in fields(value)})
    return value


def describe_search(search: SearchSpec) -> str:
    """One line for --dry-run: `main: 24 trials (tpe, seed 0), 2 jobs each, over lr, width`."""
    amount = [f"{search.trials} trials"] if search.trials is not None else []
    if search.gpu_hours is not None:
        amount.append(f"at most {search.gpu_hours:g} GPU-hours")
    seed = f", seed {search.seed}" if search.seed is not None else ""
    per = 1
    for _, values in search.grid:
        per *= len(values)
    return (f"{search.trial_job.phase}: {' or '.join(amount)} ({search.sampler}{seed}), "
            f"{per} job{'s' if per != 1 else ''} each, {search.goal} {search.metric} over "
            f"{', '.join(p.name for p in search.space)}")
