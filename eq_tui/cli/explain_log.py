"""`eq-tui explain-log LOGFILE [MANIFEST]`: what eq-tui reads from a log, line by line — the
stack it recognised, each metric and each report with its line number, the progress and where
it came from, nan — so a researcher checks a script's output before a sweep."""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from eq_tui.cli.parsing import new_parser
from eq_tui.errors import UsageError

MAX_BYTES = 64 << 20  # a longer log is read from its last 64 MiB


def parser(verb: str = "explain-log") -> argparse.ArgumentParser:
    p = new_parser(verb, "Show what eq-tui reads from a training log, line by line: the stack "
                         "it recognised, each metric and report (an evaluation, not a progress "
                         "bar's redraw) with its line number, the job's progress and where it "
                         "came from, and nan. Give the sweep's manifest to read the log as its "
                         "`metrics:` (a `pattern:`) and to check its goal and early_stop "
                         "metrics are there.")
    p.add_argument("logfile", help="a job's log (any file its script printed to)")
    p.add_argument("manifest", nargs="?", help="the sweep's manifest (its goal, early_stop, "
                                               "metrics: pattern and the job's command)")
    p.add_argument("--job", help="the manifest's job whose command and metrics: apply "
                                 "(default: its first)")
    p.add_argument("--all", action="store_true",
                   help="every line that says something, redraws included (default: reports, "
                        "stacks, nan and progress steps)")
    return p


@dataclass
class _Metric:
    reports: int = 0
    shown: int = 0  # lines that showed it (redraws included)
    first_line: int = 0
    last: float | None = None
    nan_line: int | None = None


@dataclass
class _Explained:
    stacks: dict[str, list[int]] = field(default_factory=dict)  # stack -> first, last line
    metrics: dict[str, _Metric] = field(default_factory=dict)
    lines: int = 0


def run(verb: str, argv: list[str]) -> int:
    args = parser(verb).parse_args(argv)
    path = Path(args.logfile)
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            if size > MAX_BYTES:
                handle.seek(size - MAX_BYTES)
            data = handle.read(MAX_BYTES)
    except OSError as exc:
        raise UsageError(f"explain-log: cannot read {args.logfile}: "
                         f"{exc.strerror or exc}") from None
    pattern, cmd, watched = _from_manifest(args.manifest, args.job)
    _explain(data.decode("utf-8", errors="replace"), pattern=pattern, cmd=cmd,
             watched=watched, every=args.all, skipped=max(0, size - MAX_BYTES))
    return 0


def _from_manifest(manifest: str | None, job_id: str | None
                   ) -> tuple[re.Pattern[str] | None, str, dict[str, str]]:
    """The job's `metrics: pattern`, its command and the metrics the sweep needs (name -> why)."""
    if manifest is None:
        if job_id is not None:
            raise UsageError("explain-log: --job needs a MANIFEST")
        return None, "", {}
    from eq_tui.manifest.loader import load_manifest

    loaded = load_manifest(manifest)
    if not loaded.jobs:
        return None, "", {}
    specs = loaded.job_specs
    if job_id is not None and job_id not in specs:
        from difflib import get_close_matches

        near = get_close_matches(job_id, list(specs), n=1)
        hint = f" — did you mean {near[0]}?" if near else ""
        raise UsageError(f"explain-log: no job '{job_id}' in {manifest}{hint}")
    spec = specs[job_id] if job_id is not None else loaded.jobs[0]
    phase = loaded.phase(spec.phase).results
    watched = {name: f"goal ({goal})" for name, goal in phase.goal}
    if phase.early_stop is not None:
        watched[phase.early_stop.metric] = f"early_stop ({phase.early_stop.rule})"
    pattern = re.compile(spec.metrics.pattern) if spec.metrics and spec.metrics.pattern \
        else None
    return pattern, spec.cmd, watched


def _explain(text: str, *, pattern: re.Pattern[str] | None, cmd: str,
             watched: dict[str, str], every: bool, skipped: int) -> None:
    from eq_tui.api.job_progress import JobProgress
    from eq_tui.results.parse import log_lines, read_log_line
    from eq_tui.results.stacks import Reports

    if skipped:
        print(f"(the first {skipped} bytes skipped: reading the log's last {MAX_BYTES >> 20} MiB)")
    reports = Reports()
    found = _Explained()
    progress = JobProgress()
    if cmd:
        progress.cmd_totals(cmd)
    last_source = ""
    number = 0
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, raw in enumerate(lines, start=1):
        for line in log_lines(raw):
            read = read_log_line(line, pattern)
            said: list[str] = []
            if read.stack is not None:
                if read.stack not in found.stacks:
                    said.append(f"stack {read.stack} recognised")
                found.stacks.setdefault(read.stack, [number, number])[1] = number
            new = reports.new(read)
            for name, value in read.metrics.items():
                metric = found.metrics.setdefault(name, _Metric(first_line=number))
                metric.shown += 1
                if math.isnan(value) and metric.nan_line is None:
                    metric.nan_line = number
                    said.append(f"{name} is nan")
                if name in new:
                    metric.reports += 1
                    metric.last = value
            if new:
                where = f" at {read.position}" if read.position and not read.redraw else ""
                said.append(f"report {_pairs(new)}{where}")
            elif read.metrics and every:
                why = "partial" if read.partial else "repeats"
                said.append(f"{'redraw' if read.redraw else 'line'} {_pairs(read.metrics)} "
                            f"({why}: not a report)")
            before = progress.fraction
            progress.observe(line, float(number))
            fraction = progress.fraction
            if fraction is not None and progress.source != last_source and (
                    every or before is None or int(fraction * 10) > int(before * 10)):
                said.append(f"progress {fraction:.0%} ({progress.source})")
                last_source = progress.source
            if said:
                stack = read.stack or "plain"
                print(f"line {number:>6}  {stack:<10} " + "; ".join(said))
    found.lines = number
    _summary(found, watched, cmd)
    if progress.fraction is None:
        print("progress: none read (no epoch k/N, step of a known total, or the run's bar; "
              "give the MANIFEST so the job's --epochs / --max_steps count)")
    else:
        print(f"progress: {progress.fraction:.0%} at the end ({progress.source}); it never "
              f"goes backwards")


def _pairs(values: dict[str, float]) -> str:
    shown = [f"{name}={value:.6g}" for name, value in list(values.items())[:8]]
    more = len(values) - len(shown)
    return " ".join(shown) + (f" (+{more} more)" if more > 0 else "")


def _summary(found: _Explained, watched: dict[str, str], cmd: str) -> None:
    print()
    print(f"{found.lines} lines read.")
    if found.stacks:
        print("stacks: " + ", ".join(f"{name} (lines {first}-{last})"
                                     for name, (first, last) in found.stacks.items()))
    else:
        print("stacks: none recognised; plain key=value / key: value pairs only")
    if not found.metrics:
        print("metrics: none read (use `metrics: {pattern: ...}` in the manifest for this log)")
    else:
        width = max(len(name) for name in found.metrics)
        print(f"{'metric':<{width}}  reports  shown  last        first line  nan at")
        for name, metric in found.metrics.items():
            last = "-" if metric.last is None else f"{metric.last:.6g}"
            nan = "-" if metric.nan_line is None else str(metric.nan_line)
            print(f"{name:<{width}}  {metric.reports:>7}  {metric.shown:>5}  {last:<10}  "
                  f"{metric.first_line:>10}  {nan}")
    for name, why in watched.items():
        if name not in found.metrics:
            instead = ", ".join(list(found.metrics)[:8]) or "nothing"
            print(f"WARNING: {why} metric '{name}' is never read from this log; "
                  f"read instead: {instead}")
    if cmd:
        print(f"job command: {cmd}")
