"""Reading a finished attempt's metrics on its host: one command over the host's existing
connection reads every file named (each bounded in size) and the log's tail; the texts are
parsed here.

Where: the files of the job's `metrics:` (paths relative to its cwd, launch-time variables
filled in), or, without one, the conventional files in the attempt dir ($EQ_ATTEMPT_DIR:
metrics.json, results.jsonl, metrics.csv, wandb-summary.json); and the log's `key=value`
numbers (always without `metrics:`, with `log: true` or a `pattern:` otherwise).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from eq_tui.hosts.runner import CommandRunner
from eq_tui.manifest.launchvars import substitute
from eq_tui.manifest.model import MetricsSpec
from eq_tui.results.parse import (
    Metrics,
    merge,
    parse_csv,
    parse_json,
    parse_jsonl,
    parse_log,
)

MAX_FILE_BYTES = 1 << 20  # per file: a metrics file is small; a log's last MiB is enough
CONVENTIONAL = (("json", "metrics.json"), ("jsonl", "results.jsonl"), ("csv", "metrics.csv"),
                ("wandb", "wandb-summary.json"))

# read_files.sh MAX BOUNDARY CWD PATH...: each readable file as a section `BOUNDARY file I SIZE`
# (I: its position among the paths), bounded: a bigger file sends its first line (a CSV header)
# and its last MAX bytes.
READ_FILES = r"""# read_metrics.sh MAX BOUNDARY CWD PATH...
set -u
max=$1 b=$2 cwd=$3
shift 3
if [ -n "$cwd" ] && [ "$cwd" != "-" ]; then cd "$cwd" 2>/dev/null || :; fi
i=0
for f in "$@"; do
    case $f in "~/"*) f="$HOME/${f#\~/}" ;; esac
    if [ -f "$f" ] && [ -r "$f" ]; then
        size=$(wc -c < "$f" 2>/dev/null | tr -d ' ')
        echo "$b file $i ${size:-0}"
        if [ "${size:-0}" -gt "$max" ]; then
            head -n 1 "$f" | head -c 65536; echo; tail -c "$max" "$f"
        else
            cat "$f"
        fi
        echo
    fi
    i=$((i + 1))
done
echo "$b end"
"""


@dataclass(frozen=True)
class Wanted:
    kind: str  # json | jsonl | csv | wandb | log
    path: str


def wanted_files(spec: MetricsSpec | None, *, attempt_dir: str, run_dir: str, job_id: str,
                 attempt: int) -> list[Wanted]:
    """What to read for one attempt, in order of precedence (a file's value wins over the
    log's)."""
    log = Wanted("log", f"{attempt_dir}/log")
    if spec is None:
        return [*(Wanted(kind, f"{attempt_dir}/{name}") for kind, name in CONVENTIONAL), log]
    files = [Wanted(kind, substitute(path, run_dir=run_dir, attempt=attempt, job_id=job_id))
             for kind in ("json", "jsonl", "csv") if (path := getattr(spec, kind))]
    return [*files, log] if spec.log or spec.pattern else files


def parse_file(kind: str, text: str, pattern: re.Pattern[str] | None = None) -> Metrics:
    if kind == "json":
        return parse_json(text)
    if kind == "wandb":
        return parse_json(text, skip_private=True)
    if kind == "jsonl":
        return parse_jsonl(text)
    if kind == "csv":
        return parse_csv(text)
    return parse_log(text.splitlines(), pattern)


def split_sections(text: str, boundary: str) -> dict[int, str]:
    sections: dict[int, str] = {}
    current: int | None = None
    lines: list[str] = []
    for line in text.split("\n"):
        if line.startswith(boundary + " "):
            if current is not None:
                sections[current] = "\n".join(lines)
            parts = line.split()
            current = int(parts[2]) if len(parts) >= 4 and parts[1] == "file" \
                and parts[2].isdigit() else None
            lines = []
        elif current is not None:
            lines.append(line)
    return sections


@dataclass(frozen=True)
class Collected:
    metrics: Metrics
    sources: tuple[str, ...]  # the files that gave metrics


async def collect(runner: CommandRunner, wanted: list[Wanted], *, cwd: str | None,
                  pattern: str | None = None, timeout: float = 60.0) -> Collected:
    """Read and parse; HostError when the host cannot be reached."""
    if not wanted:
        return Collected({}, ())
    boundary = f"@@eq-results-{secrets.token_hex(8)}"
    result = await runner.run(READ_FILES, [str(MAX_FILE_BYTES), boundary, cwd or "-",
                                           *(w.path for w in wanted)], timeout=timeout)
    sections = split_sections(result.stdout.decode("utf-8", errors="replace"), boundary)
    compiled = re.compile(pattern) if pattern else None
    parsed: list[Metrics] = []
    sources: list[str] = []
    for i, item in enumerate(wanted):
        if i not in sections:
            continue
        metrics = parse_file(item.kind, sections[i], compiled)
        if metrics:
            parsed.append(metrics)
            sources.append(item.path)
    return Collected(merge(*parsed), tuple(sources))
