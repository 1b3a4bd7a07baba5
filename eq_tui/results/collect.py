"""Reading a finished attempt's metrics on its host: one command over the host's existing
connection (hosts/scripts/read_metrics.sh, plain sh: the host needs no Python) finds and reads
every file wanted, each bounded in size, and the log's tail; the texts are parsed here.

Where: the files of the job's `metrics:` (paths relative to its cwd, launch-time variables
filled in; `hf_state` may be a glob, `tensorboard` a directory). Where `metrics:` names no file,
the conventional files in the attempt dir ($EQ_ATTEMPT_DIR: metrics.json, results.jsonl,
metrics.csv, wandb-summary.json), then what the stacks write in the job's cwd while it runs
(HF Trainer's trainer_state.json, Lightning's metrics.csv, TensorBoard events: the script says
which are the attempt's own), and the log's numbers (always without `metrics:`, with `log: true`
or a `pattern:` otherwise).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from eq_tui.hosts.runner import CommandRunner
from eq_tui.hosts.shell_protocol import script
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
from eq_tui.results.stack_files import (
    TB_SKIPPED,
    decode_transport,
    parse_events,
    parse_lightning_csv,
    parse_trainer_state,
    tensorboard_available,
)

MAX_FILE_BYTES = 1 << 20  # per file: a metrics file is small; a log's last MiB is enough
MAX_EVENT_BYTES = 4 << 20  # an event file's last 4 MiB: the scalars of a long run's end
CONVENTIONAL = (("json", "metrics.json"), ("jsonl", "results.jsonl"), ("csv", "metrics.csv"),
                ("wandb", "wandb-summary.json"))
# what the stacks write in the cwd, found by the host script (`find-<what>`), and its parser
DISCOVERED = (("hf", "hf_state"), ("pl", "lightning"), ("tb", "tensorboard"))
NAMES = {"hf_state": "trainer_state.json", "lightning": "Lightning metrics.csv",
         "tensorboard": "TensorBoard event"}


@dataclass(frozen=True)
class Wanted:
    kind: str  # json | jsonl | csv | wandb | log | hf_state | lightning | tensorboard
    path: str  # "" for a file the host script discovers
    how: str = "text"  # the script's request: text | glob | tb | find-hf | find-pl | find-tb
    since: str = "-"  # the attempt dir that dates the attempt (glob, tb and find requests)


def wanted_files(spec: MetricsSpec | None, *, attempt_dir: str, run_dir: str, job_id: str,
                 attempt: int) -> list[Wanted]:
    """What to read for one attempt, in order of precedence (a file's value wins over the
    log's)."""
    log = Wanted("log", f"{attempt_dir}/log")
    if spec is None or not spec.files():
        files = [Wanted(kind, f"{attempt_dir}/{name}") for kind, name in CONVENTIONAL] \
            if spec is None else []
        found = [Wanted(kind, "", f"find-{what}", attempt_dir) for what, kind in DISCOVERED]
        return [*files, *found, log] if spec is None or spec.log or spec.pattern else found

    def filled(path: str) -> str:
        return substitute(path, run_dir=run_dir, attempt=attempt, job_id=job_id)

    files = [Wanted(kind, filled(path)) for kind in ("json", "jsonl", "csv")
             if (path := getattr(spec, kind))]
    if spec.hf_state:
        files.append(Wanted("hf_state", filled(spec.hf_state), "glob", attempt_dir))
    if spec.tensorboard:
        files.append(Wanted("tensorboard", filled(spec.tensorboard), "tb", attempt_dir))
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
    if kind == "hf_state":
        return parse_trainer_state(text)
    if kind == "lightning":
        return parse_lightning_csv(text)
    return parse_log(text.splitlines(), pattern)


@dataclass(frozen=True)
class Section:
    encoding: str  # file (text) | b64 | hex | none (found, not sent) | several (not told apart)
    size: int  # the file's size on the host (several: 0)
    path: str  # the file read (several: the runs' directories)
    body: str


def read_sections(text: str, boundary: str) -> dict[int, Section]:
    """The script's sections by request position; a header needs the boundary, which the files
    cannot know."""
    sections: dict[int, Section] = {}
    head: tuple[int, str, int, str] | None = None
    lines: list[str] = []

    def close() -> None:
        if head is not None:
            sections[head[0]] = Section(head[1], head[2], head[3], "\n".join(lines))

    for line in text.split("\n"):
        if not line.startswith(boundary + " "):
            if head is not None:
                lines.append(line)
            continue
        close()
        lines = []
        parts = line.split(" ", 4)
        head = None
        if len(parts) >= 3 and parts[2].isdigit():
            if parts[1] == "several":
                head = (int(parts[2]), "several", 0, " ".join(parts[3:]).strip())
            elif len(parts) >= 4 and parts[1] in ("file", "b64", "hex", "none") \
                    and parts[3].isdigit():
                head = (int(parts[2]), parts[1], int(parts[3]), parts[4] if len(parts) > 4 else "")
    close()
    return sections


def split_sections(text: str, boundary: str) -> dict[int, str]:
    """The text sections' bodies by request position."""
    return {i: section.body for i, section in read_sections(text, boundary).items()
            if section.encoding == "file"}


@dataclass(frozen=True)
class Collected:
    metrics: Metrics
    sources: tuple[str, ...]  # the files that gave metrics
    notes: tuple[str, ...] = ()  # what was found and not read, and why: one line each


def _requests(wanted: list[Wanted], tensorboard: bool) -> list[str]:
    args = []
    for item in wanted:
        how = item.how
        if item.kind == "tensorboard" and not tensorboard:
            how = f"{how}note"
        args += [how, item.since, item.path or "-"]
    return args


def _several_note(kind: str, dirs: str) -> str:
    return (f"{NAMES.get(kind, kind)} files of several runs ({dirs}) were written while the job "
            f"ran, in a directory other jobs share, and none is named by its command: none "
            f"read; name the job's own in `metrics:` ({kind.replace('lightning', 'csv')}: PATH)")


async def collect(runner: CommandRunner, wanted: list[Wanted], *, cwd: str | None,
                  pattern: str | None = None, timeout: float = 60.0) -> Collected:
    """Read and parse; HostError when the host cannot be reached."""
    if not wanted:
        return Collected({}, ())
    boundary = f"@@eq-results-{secrets.token_hex(8)}"
    tensorboard = tensorboard_available()
    result = await runner.run(script("read_metrics.sh"),
                              [str(MAX_FILE_BYTES), str(MAX_EVENT_BYTES), boundary, cwd or "-",
                               *_requests(wanted, tensorboard)], timeout=timeout)
    sections = read_sections(result.stdout.decode("utf-8", errors="replace"), boundary)
    compiled = re.compile(pattern) if pattern else None
    parsed: list[Metrics] = []
    sources: list[str] = []
    notes: list[str] = []
    for i, item in enumerate(wanted):
        section = sections.get(i)
        if section is None:
            continue
        if section.encoding == "several":
            notes.append(_several_note(item.kind, section.path))
            continue
        if section.encoding == "none":
            notes.append(TB_SKIPPED)
            continue
        if section.encoding in ("b64", "hex"):
            data = decode_transport(section.encoding, section.body)
            metrics = parse_events(data, cut=section.size > len(data)) if tensorboard else {}
        else:
            metrics = parse_file(item.kind, section.body, compiled)
        if metrics:
            parsed.append(metrics)
            sources.append(item.path if item.how == "text" else section.path)
    return Collected(merge(*parsed), tuple(sources), tuple(dict.fromkeys(notes)))
