"""Configurations over seeds: one row per configuration — its phase and grid parameters minus
the seed-like key — with n of expected, mean ± std, min and max of each metric, the seeds that
are missing or failed, duplicate seeds, and the best row per metric by its goal. A row whose
completed jobs ran different commands (one edited, a clone with --set, a manifest changed after
some completed) says so, and is not ranked best: it averages unlike things. Pure."""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from eq_tui.results.records import Record

HIDDEN_BY_DEFAULT = frozenset({"epoch", "step", "_step", "global_step"})
MAX_DEFAULT_METRICS = 6


class MixedConfigurations(ValueError):
    """Grouping would average jobs that differ in a parameter other than the one averaged over."""


@dataclass(frozen=True)
class Cell:
    values: tuple[float, ...]  # finite values of the completed seeds
    nonfinite: int = 0  # completed seeds whose value was NaN/inf (or null)

    @property
    def n(self) -> int:
        return len(self.values)

    @cached_property
    def mean(self) -> float | None:
        return math.fsum(self.values) / len(self.values) if self.values else None

    @cached_property
    def std(self) -> float | None:
        """The sample standard deviation (n - 1), as statistics.stdev gives it."""
        if len(self.values) < 2 or self.mean is None:
            return None
        mean = self.mean
        return math.sqrt(math.fsum((v - mean) ** 2 for v in self.values)
                         / (len(self.values) - 1))

    @property
    def min(self) -> float | None:
        return min(self.values) if self.values else None

    @property
    def max(self) -> float | None:
        return max(self.values) if self.values else None


@dataclass
class Row:
    phase: str
    params: dict[str, str]  # what makes the configuration (the label of a single job: its id)
    members: list[Record] = field(default_factory=list)
    cells: dict[str, Cell] = field(default_factory=dict)
    best: set[str] = field(default_factory=set)  # metrics this row is best at
    # its completed members by the command they ran (those alike together): more than one
    # group, and its means average unlike things
    commands: list[list[Record]] = field(default_factory=list)

    @property
    def unlike(self) -> bool:
        return len(self.commands) > 1

    @cached_property
    def cost(self) -> RowCost:
        return row_cost(self.members)

    @property
    def expected(self) -> int:
        return len(self.members)

    @property
    def done(self) -> int:
        return sum(1 for m in self.members if m.get("status") == "completed")

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params.items()) or "-"


@dataclass(frozen=True)
class RowCost:
    """What a configuration cost: GPU-hours and energy (Wh) over its completed jobs (mean ±
    std: comparable runs), and in all over every job of it and every attempt."""

    gpu_h: Cell
    energy_wh: Cell  # the completed jobs whose energy is known
    unknown: int  # completed jobs whose energy is unknown (no power reading)
    total_gpu_h: float
    total_wh: float | None  # None: some job's energy is unknown


def _cost(record: Record) -> tuple[float, float | None] | None:
    cost = record.get("cost")
    if not isinstance(cost, dict) or not isinstance(cost.get("gpu_s"), (int, float)):
        return None
    joules = cost.get("energy_j")
    return float(cost["gpu_s"]), float(joules) if isinstance(joules, (int, float)) else None


def row_cost(members: Sequence[Record]) -> RowCost:
    hours: list[float] = []
    wh: list[float] = []
    unknown = 0
    total_h, total_wh, known = 0.0, 0.0, True
    for member in members:
        cost = _cost(member)
        if cost is None:
            continue
        gpu_s, joules = cost
        total_h += gpu_s / 3600
        if joules is None:
            known = known and gpu_s == 0
        else:
            total_wh += joules / 3600
        if member.get("status") == "completed":
            hours.append(gpu_s / 3600)
            if joules is None:
                unknown += 1
            else:
                wh.append(joules / 3600)
    return RowCost(Cell(tuple(hours)), Cell(tuple(wh)), unknown, total_h,
                   total_wh if known else None)


@dataclass
class Table:
    group_over: str
    metrics: list[str]
    goals: dict[str, str]
    rows: list[Row]

    @cached_property
    def has_cost(self) -> bool:
        """Whether the records say what they cost (results.jsonl from before they did not)."""
        return any(_cost(m) is not None for row in self.rows for m in row.members)

    def total_cost(self) -> tuple[float, float | None]:
        """The sweep's GPU-hours and Wh (None: some job's energy is unknown)."""
        hours = sum(row.cost.total_gpu_h for row in self.rows)
        wh = [row.cost.total_wh for row in self.rows]
        return hours, None if None in wh else sum(w for w in wh if w is not None)

    def seeds(self, row: Row) -> list[str]:
        return [seed_of(m, self.group_over) for m in row.members]

    def missing(self, row: Row) -> list[str]:
        """`seed=3 (stuck)` for each member that has not completed (pruned ones aside)."""
        return [f"{self.name(m)} ({m.get('status', '?')})"
                for m in row.members if m.get("status") not in ("completed", "pruned")]

    def pruned(self, row: Row) -> list[str]:
        """`seed=2 (val_acc 0.612)` for each member early stopping stopped: its last numbers,
        partial (never in the means)."""
        shown = self.metrics[:1]
        out = []
        for member in row.members:
            if member.get("status") != "pruned":
                continue
            metrics = member.get("metrics") or {}
            values = [f"{m} {metrics[m]:.4g}" for m in shown
                      if isinstance(metrics.get(m), (int, float))]
            out.append(f"{self.name(member)} ({', '.join(values)})" if values
                       else self.name(member))
        return out

    def name(self, record: Record) -> str:
        """A member as the notes name it: `seed=3`, or its id when it has no such key."""
        params = record.get("params") or {}
        if self.group_over in params:
            return f"{self.group_over}={params[self.group_over]}"
        return str(record.get("id"))

    def unlike_note(self, row: Row) -> str:
        """`commands differ: seed=1, seed=2 | seed=3; not ranked`, or "" when alike."""
        if not row.unlike:
            return ""
        groups = " | ".join(", ".join(self.name(m) for m in g) for g in row.commands)
        return f"commands differ: {groups}; not ranked"

    def duplicates(self, row: Row) -> list[str]:
        seen: dict[str, int] = {}
        for seed in self.seeds(row):
            seen[seed] = seen.get(seed, 0) + 1
        return [seed for seed, count in seen.items() if count > 1]


def seed_of(record: Record, group_over: str) -> str:
    params = record.get("params") or {}
    return str(params.get(group_over, record.get("id")))


def configuration(params: Mapping[str, str], job_id: str, group_over: str) -> dict[str, str]:
    """What makes a job's configuration: its grid point minus the key averaged over (seeds of
    one configuration share it); a job not from a grid is its own configuration."""
    if not params:
        return {"job": job_id}
    return {k: str(v) for k, v in params.items() if k != group_over}


def _config(record: Record, group_over: str, by: Sequence[str] | None) -> dict[str, str]:
    params: Mapping[str, str] = record.get("params") or {}
    if params and by:
        return {key: str(params.get(key, "-")) for key in by}
    return configuration(params, str(record["id"]), group_over)


def _check_same(row: Row, group_over: str, by: Sequence[str]) -> None:
    first = row.members[0].get("params") or {}
    for other in row.members[1:]:
        params = other.get("params") or {}
        for key in sorted(set(first) | set(params)):
            if key in by or key == group_over or first.get(key) == params.get(key):
                continue
            raise MixedConfigurations(
                f"refusing to average {row.members[0]['id']} and {other['id']}: they differ "
                f"in {key} ({first.get(key, '-')} vs {params.get(key, '-')}), not only in "
                f"{group_over}; add {key} to --by")


def pick_metrics(records: Sequence[Record], goals: Mapping[str, str],
                 wanted: Sequence[str] | None) -> list[str]:
    if wanted:
        return list(wanted)
    seen: dict[str, None] = {}
    for record in records:
        for key in record.get("metrics") or {}:
            seen.setdefault(key, None)
    with_goal = [key for key in goals if key in seen]
    if with_goal:
        return with_goal
    return [key for key in seen if key not in HIDDEN_BY_DEFAULT][:MAX_DEFAULT_METRICS]


def _words(cmd: str) -> list[str]:
    try:
        return shlex.split(cmd)
    except ValueError:
        return cmd.split()


def _masked(word: str, seed: str) -> str:
    """`word` with its seed blanked where it stands alone (`--seed 3`, `out/lr0.1_s3.json`: not
    the 3 of `0.3` or of `13`)."""
    lead = "[A-Za-z0-9.]" if seed[:1].isalpha() else "[0-9.]"
    tail = "[A-Za-z0-9]" if seed[-1:].isalpha() else "[0-9]"
    return re.sub(f"(?<!{lead}){re.escape(seed)}(?!{tail})", "\0", word)


def alike(a: str, seed_a: str | None, b: str, seed_b: str | None) -> bool:
    """Two commands of one configuration: word for word the same, but where each holds its own
    seed (the value averaged over)."""
    words_a, words_b = _words(a), _words(b)
    if len(words_a) != len(words_b):
        return False
    return all(x == y or (bool(seed_a) and bool(seed_b) and _masked(x, str(seed_a))
                          == _masked(y, str(seed_b)))
               for x, y in zip(words_a, words_b, strict=True))


def command_groups(members: Sequence[Record], group_over: str) -> list[list[Record]]:
    """The completed members that recorded their command, alike ones together."""
    groups: list[list[Record]] = []
    for member in members:
        cmd = member.get("cmd")
        if member.get("status") != "completed" or not isinstance(cmd, str):
            continue
        seed = (member.get("params") or {}).get(group_over)
        for found in groups:
            first = found[0]
            if alike(first["cmd"], (first.get("params") or {}).get(group_over), cmd, seed):
                found.append(member)
                break
        else:
            groups.append([member])
    return groups


def _cell(members: Sequence[Record], metric: str) -> Cell:
    values: list[float] = []
    nonfinite = 0
    for member in members:
        if member.get("status") != "completed":
            continue
        metrics = member.get("metrics") or {}
        if metric not in metrics:
            continue
        value = metrics[metric]
        if isinstance(value, (int, float)) and not isinstance(value, bool) \
                and math.isfinite(value):
            values.append(float(value))
        else:
            nonfinite += 1
    return Cell(tuple(values), nonfinite)


def group(records: Sequence[Record], *, group_over: str = "seed",
          goals: Mapping[str, str] | None = None, metrics: Sequence[str] | None = None,
          by: Sequence[str] | None = None) -> Table:
    """The results table. Raises MixedConfigurations when `by` would put jobs that differ in
    another parameter into one row."""
    goals = dict(goals or {})
    rows: dict[tuple[str, tuple[tuple[str, str], ...]], Row] = {}
    for record in records:
        config = _config(record, group_over, by)
        key = (str(record.get("phase", "main")), tuple(config.items()))
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(phase=key[0], params=config)
        row.members.append(record)
    chosen = pick_metrics(records, goals, metrics)
    for row in rows.values():
        if by:
            _check_same(row, group_over, by)
        row.cells = {metric: _cell(row.members, metric) for metric in chosen}
        row.commands = command_groups(row.members, group_over)
    table = Table(group_over=group_over, metrics=chosen, goals=goals, rows=list(rows.values()))
    mark_best(table)
    return table


def mark_best(table: Table) -> None:
    """Per phase and metric with a goal: the row(s) whose mean is best among two or more rows
    with a mean (a row whose jobs ran different commands is not ranked); or a row alone with a
    mean when early stopping pruned the others of its phase."""
    pruned_phases = {row.phase for row in table.rows
                     if any(m.get("status") == "pruned" for m in row.members)}
    for metric in table.metrics:
        way = table.goals.get(metric)
        if way not in ("max", "min"):
            continue
        by_phase: dict[str, list[tuple[float, Row]]] = {}
        for row in table.rows:
            mean = row.cells[metric].mean
            if mean is not None and not row.unlike:
                by_phase.setdefault(row.phase, []).append((mean, row))
        for phase, scored in by_phase.items():
            if len(scored) < 2 and phase not in pruned_phases:
                continue
            target = max(s for s, _ in scored) if way == "max" else min(s for s, _ in scored)
            for score, row in scored:
                if score == target:
                    row.best.add(metric)


def sort_rows(table: Table, column: str, *, descending: bool = False) -> list[Row]:
    """Rows ordered within each phase (phases keep their order) on a metric's mean (rows
    without one last) or on a parameter (numbers as numbers)."""
    phases = {phase: i for i, phase in enumerate(dict.fromkeys(r.phase for r in table.rows))}

    def value(row: Row) -> tuple[int, float, str]:
        if column in table.metrics:
            mean = row.cells[column].mean
            return (0, mean, "") if mean is not None else (1, 0.0, "")
        text = row.params.get(column)
        if text is None:
            return (1, 0.0, "")
        try:
            return (0, float(text), "")
        except ValueError:
            return (0, 0.0, text)

    ordered = sorted(table.rows, key=value, reverse=descending)
    # a missing value stays last either way
    ordered = [r for r in ordered if value(r)[0] == 0] + [r for r in ordered if value(r)[0]]
    return sorted(ordered, key=lambda r: phases[r.phase])
