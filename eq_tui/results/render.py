"""The results table as text: table (aligned, for a terminal), markdown, csv, json, latex."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from typing import Any

from eq_tui.results import numbers
from eq_tui.results.group import Cell, Row, Table
from eq_tui.results.unseen import Unseen, markdown

FORMATS = ("table", "csv", "json", "markdown", "latex")


num = numbers.plain


def mean_std(cell: Cell, *, pm: str = "±") -> str:
    """`0.763 ± 0.010`: rounded as a person writes it (numbers.py)."""
    return numbers.mean_std(cell.mean, cell.std, pm=pm)


def gpu_time_cell(cell: Cell, *, pm: str = "±") -> str:
    """A row's GPU time (its cell is in hours) in the unit that fits: `3.3 ± 0.21 GPU-min`."""
    return numbers.gpu_time_mean_std(_scaled(cell.mean, 3600), _scaled(cell.std, 3600), pm=pm)


def energy_cell(cell: Cell, *, pm: str = "±") -> str:
    """A row's energy (its cell is in Wh) in Wh or kWh."""
    return numbers.energy_mean_std(cell.mean, cell.std, pm=pm)


def _scaled(value: float | None, by: float) -> float | None:
    return None if value is None else value * by


def param_keys(table: Table) -> list[str]:
    keys: dict[str, None] = {}
    for row in table.rows:
        for key in row.params:
            keys.setdefault(key, None)
    return list(keys)


def notes(table: Table, row: Row) -> str:
    parts = []
    missing = table.missing(row)
    if missing:
        parts.append("missing " + ", ".join(missing))
    pruned = table.pruned(row)
    if pruned:
        parts.append("pruned " + ", ".join(pruned) + " (partial)")
    dups = table.duplicates(row)
    if dups:
        parts.append(f"duplicate {table.group_over} " + ", ".join(dups))
    bad = [f"{m}: {c.nonfinite} non-finite" for m, c in row.cells.items() if c.nonfinite]
    parts += bad
    if table.has_cost and row.cost.unknown:
        parts.append(f"energy unknown: {row.cost.unknown} (no power reading)")
    if row.unlike:
        parts.append(table.unlike_note(row))
    return "; ".join(parts)


def _goal_title(table: Table, metric: str) -> str:
    way = table.goals.get(metric)
    return f"{metric} ({'↑' if way == 'max' else '↓'})" if way else metric


def span(cell: Cell) -> str:
    return f"{num(cell.min)}..{num(cell.max)}" if cell.n > 1 else ""


def _grid(table: Table, *, best: Callable[[str], str], pm: str = "±",
          title: Callable[[str], str] | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and rows: phase, the parameters, n of expected, then per metric its mean ± std
    and its min..max over the seeds, then the notes."""
    keys = param_keys(table)
    title = title or (lambda m: _goal_title(table, m))
    header = ["phase", *keys, "n"]
    for metric in table.metrics:
        header += [title(metric), "min..max"]
    if table.has_cost:
        header += ["GPU time", "energy"]
    header.append("notes")
    body = []
    for row in table.rows:
        line = [row.phase, *[row.params.get(k, "-") for k in keys], f"{row.done}/{row.expected}"]
        for metric in table.metrics:
            cell = row.cells[metric]
            text = mean_std(cell, pm=pm)
            line += [best(text) if metric in row.best else text, span(cell)]
        if table.has_cost:
            line += [gpu_time_cell(row.cost.gpu_h, pm=pm),
                     energy_cell(row.cost.energy_wh, pm=pm)]
        line.append(notes(table, row))
        body.append(line)
    return header, body


def goal_hint(table: Table) -> str | None:
    """How to get the best marked, when no metric shown has a goal."""
    if not table.metrics or any(m in table.goals for m in table.metrics):
        return None
    read = {name for row in table.rows for member in row.members
            for name in member.get("metrics") or {}}
    if table.goals and not read & set(table.goals):  # said below the table (unseen.py)
        return f"no best marked: no job's metrics include the goal's ({', '.join(table.goals)})"
    return (f"no best marked: no metric has a goal; `goal: {{{table.metrics[0]}: max}}` (or min) "
            "in the manifest marks each phase's best")


def render_table(table: Table) -> str:
    header, body = _grid(table, best=lambda text: f"{text} *")
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
             for r in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if any(row.best for row in table.rows):
        lines.append("* best of its phase by the metric's goal (↑ max, ↓ min); "
                     f"mean ± std over {table.group_over}")
    elif hint := goal_hint(table):
        lines.append(hint)
    if table.has_cost:
        lines.append(total_line(table))
    if any(row.unlike for row in table.rows):
        lines.append("commands differ: the row's jobs ran different commands (edited, cloned "
                     "with --set, or the manifest changed after some completed): its mean "
                     "averages unlike runs; --format json lists each command")
    return "\n".join(lines) + "\n"


def total_line(table: Table) -> str:
    """The sweep's cost in all: every job, every attempt."""
    hours, wh = table.total_cost()
    energy = "unknown (some GPUs had no power reading)" if wh is None else numbers.energy(wh)
    return (f"cost in all: {numbers.gpu_time(hours * 3600)}, energy {energy}; GPU time and "
            "energy per row: mean ± std over its completed jobs")


def render_markdown(table: Table) -> str:
    header, body = _grid(table, best=lambda text: f"**{text}**")
    esc = [[cell.replace("|", "\\|") for cell in r] for r in [header, *body]]
    lines = ["| " + " | ".join(esc[0]) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in esc[1:]]
    if table.has_cost:
        lines += ["", total_line(table)]
    return "\n".join(lines) + "\n"


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
          "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
          "^": r"\textasciicircum{}", "↑": r"$\uparrow$", "↓": r"$\downarrow$"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX.get(ch, ch) for ch in text)


def render_latex(table: Table) -> str:
    marker = "\0PM\0"
    header, body = _grid(table, best=lambda text: f"\0B{text}\0E", pm=marker)

    def cell(text: str) -> str:
        out = latex_escape(text.replace(marker, "±")).replace("±", r"$\pm$")
        return out.replace("\0B", r"\textbf{").replace("\0E", "}")

    costs = 2 if table.has_cost else 0
    cols = ("l" * (len(header) - 2 * len(table.metrics) - 1 - costs)
            + "rl" * len(table.metrics) + "r" * costs + "l")
    lines = [rf"\begin{{tabular}}{{{cols}}}", r"\toprule",
             " & ".join(cell(h) for h in header) + r" \\", r"\midrule"]
    lines += [" & ".join(cell(c) for c in r) + r" \\" for r in body]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def _row_data(table: Table, row: Row) -> dict[str, Any]:
    return {
        "phase": row.phase, "params": row.params, "n": row.done, "expected": row.expected,
        "metrics": {m: {"n": c.n, "mean": c.mean, "std": c.std, "min": c.min, "max": c.max,
                        "nonfinite": c.nonfinite, "best": m in row.best}
                    for m, c in row.cells.items()},
        "missing": table.missing(row), "pruned": table.pruned(row),
        "duplicates": table.duplicates(row),
        "jobs": [m["id"] for m in row.members],
        # its completed jobs by the command they ran: more than one, and it averages unlike
        # things (it is then never ranked best)
        "commands_differ": row.unlike,
        "commands": [{"cmd": g[0]["cmd"], "jobs": [m["id"] for m in g]} for g in row.commands],
        **({"cost": _cost_data(row)} if table.has_cost else {}),
    }


def _cost_data(row: Row) -> dict[str, Any]:
    """GPU-hours and energy (Wh): mean ± std over its completed jobs, and in all (every job and
    attempt; energy null when some job's is unknown)."""
    cost = row.cost
    return {"gpu_hours": {"n": cost.gpu_h.n, "mean": cost.gpu_h.mean, "std": cost.gpu_h.std,
                          "total": cost.total_gpu_h},
            "energy_wh": {"n": cost.energy_wh.n, "mean": cost.energy_wh.mean,
                          "std": cost.energy_wh.std, "total": cost.total_wh,
                          "unknown": cost.unknown}}


def render_json(table: Table, unseen: Sequence[Unseen] = ()) -> str:
    """`metrics_never_read`: the goal and early_stop metrics never read (results/unseen.py)."""
    data: dict[str, Any] = {"group_over": table.group_over, "goals": table.goals,
                            "metrics": table.metrics,
                            "rows": [_row_data(table, row) for row in table.rows],
                            "metrics_never_read": [finding.to_json() for finding in unseen]}
    if table.has_cost:
        hours, wh = table.total_cost()
        data["cost"] = {"gpu_hours": hours, "energy_wh": wh}
    return json.dumps(data, indent=2) + "\n"


def render_csv(table: Table) -> str:
    keys = param_keys(table)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    stats = ("mean", "std", "min", "max", "n")
    writer.writerow(["phase", *keys, "n", "expected",
                     *[f"{m}_{s}" for m in table.metrics for s in stats], "best", "missing",
                     "duplicates", "commands_differ",
                     *(COST_COLUMNS if table.has_cost else ())])
    for row in table.rows:
        values: list[Any] = []
        for metric in table.metrics:
            c = row.cells[metric]
            values += [_plain(c.mean), _plain(c.std), _plain(c.min), _plain(c.max), c.n]
        writer.writerow([row.phase, *[row.params.get(k, "") for k in keys], row.done,
                         row.expected, *values, " ".join(sorted(row.best)),
                         "; ".join(table.missing(row)), " ".join(table.duplicates(row)),
                         table.unlike_note(row), *(_cost_cells(row) if table.has_cost else ())])
    return out.getvalue()


COST_COLUMNS = ("gpu_h_mean", "gpu_h_std", "gpu_h_total", "energy_wh_mean", "energy_wh_std",
                "energy_wh_total")


def _cost_cells(row: Row) -> list[str]:
    cost = row.cost
    return [_plain(cost.gpu_h.mean), _plain(cost.gpu_h.std), _plain(cost.total_gpu_h),
            _plain(cost.energy_wh.mean), _plain(cost.energy_wh.std), _plain(cost.total_wh)]


def _plain(value: float | None) -> str:
    return "" if value is None else repr(value)


RENDERERS: dict[str, Callable[[Table], str]] = {
    "table": render_table, "csv": render_csv, "json": render_json,
    "markdown": render_markdown, "latex": render_latex}


def unseen_text(unseen: Sequence[Unseen]) -> str:
    """The metrics never read, as lines below a terminal's table."""
    return "\n" + "".join(f"{finding.text()}\n" for finding in unseen)


def render(table: Table, fmt: str, unseen: Sequence[Unseen] = ()) -> str:
    """The table in `fmt`; the metrics never read below a table or markdown's, under json's
    `metrics_never_read` (csv and latex stay the table alone: a program reads them)."""
    if fmt == "json":
        return render_json(table, unseen)
    text = RENDERERS[fmt](table)
    if unseen and fmt == "table":
        return text + unseen_text(unseen)
    if unseen and fmt == "markdown":
        return f"{text}\n{markdown(unseen)}"
    return text
