"""Job JSON → the cells of its job-table row. Pure and cheap: it runs for every changed job."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eq_tui.api import progress_fraction
from eq_tui.present.durations import format_duration, format_short
from eq_tui.present.pace import Pace

LAST_LINE_WIDTH = 50
PROGRESS_WIDTH = 16  # "100% █████ 3h10m"
BAR_WIDTH = 5
BAR_EIGHTHS = " ▏▎▍▌▋▊▉█"


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int | None = None


COLUMNS: tuple[Column, ...] = (
    Column("id", "id", 24),  # as wide as the longest id (id_width), pinned while scrolling
    Column("project", "project", 12),
    Column("phase", "phase", 10),
    Column("status", "status", 10),
    # beside the status, so that why a job failed is in view at 80 columns too
    Column("failure", "failure", 9),  # FAILURE_SHORT: a class name that fits
    Column("progress", "progress", PROGRESS_WIDTH),  # running jobs that print their progress
    Column("metric", "metric", 22),  # shown once `m` picks a metric: near the id, in view
    Column("priority", "pri", 3),
    Column("where", "host:gpu", 12),
    Column("attempt", "try", 5),
    Column("duration", "time", 7),
    Column("last_line", "last log line", LAST_LINE_WIDTH),
)
ID_WIDTH_MIN = 8
WHERE_COLUMN = next(c for c in COLUMNS if c.key == "where")
WHERE_WIDTH_MAX = 32
GPU_ONLY_LABEL = "gpu"  # the host:gpu column of a run on one host: its GPUs only
GPU_ONLY_WIDTH = 5  # `0,1`, `cpu`, a GPU shared by three
COLUMN_KEYS: tuple[str, ...] = tuple(c.key for c in COLUMNS)
LIVE_STATUSES = frozenset({"launching", "running"})
WAITING_NOW = frozenset({"pending", "failed_oom"})
REASON_FIRST = WAITING_NOW | {"killed"}  # their reason says more than their log's last line
Cells = tuple[str, ...]


def row_key(project: str, job_id: str) -> str:
    return f"{project}/{job_id}"


def split_row_key(key: str) -> tuple[str, str]:
    project, _, job_id = key.partition("/")
    return project, job_id


def job_duration(job: Mapping[str, Any], now: float) -> float | None:
    """How long the current attempt has run (or ran)."""
    started = job.get("started")
    if started is None:
        return None
    ended = job.get("ended")
    if job.get("status") in LIVE_STATUSES or ended is None:
        return now - float(started)
    return float(ended) - float(started)


SHARED_MARK = "\N{MULTIPLICATION SIGN}"


def where(job: Mapping[str, Any], shared: int = 0, *, host: bool = True) -> str:
    """`box1:2`, `box1:0,1`; SHARED_MARK and a count after it when that many of our jobs share
    its GPU (`shared`); `box1:cpu` for a job that takes no GPU. Without the host (`host`
    False, a run on one host): `2`, `0,1`, `cpu`."""
    name = job.get("host")
    if not name:
        return ""
    gpus = job.get("gpus") or []
    mark = f"{SHARED_MARK}{shared}" if shared > 1 and gpus else ""
    place = f"{','.join(str(g) for g in gpus)}{mark}" if gpus else "cpu"
    return f"{name}:{place}" if host else place


def where_width(hosts: Iterable[str]) -> int:
    """The host:gpu column as wide as the longest host name and two GPU indexes (or one and how
    many jobs share it), so every running job's GPU can be read (within reason); a run on one
    host: its GPUs only (GPU_ONLY_WIDTH)."""
    names = set(hosts)
    if len(names) <= 1:
        return GPU_ONLY_WIDTH
    longest = max(len(name) for name in names)
    return max(WHERE_COLUMN.width or 12, min(WHERE_WIDTH_MAX, longest + 4))


def attempt_text(job: Mapping[str, Any], max_attempts: int) -> str:
    """Launches so far / the most it can get for its current failure class (the engine keeps
    `attempt_limit`; `max_attempts` only for a record without it)."""
    n = int(job.get("attempts") or 0)
    limit = int(job.get("attempt_limit") or 0) or max(n, max_attempts)
    return f"{n}/{limit}" if n else ""


def failure_class(job: Mapping[str, Any]) -> str:
    failure = job.get("failure")
    return str(failure.get("class") or "") if isinstance(failure, Mapping) else ""


# the failure column's words: at most 9 characters, so that the class reads whole
FAILURE_SHORT = {"port_in_use": "port used", "output_missing": "no output",
                 "dependency": "upstream", "launch_failed": "no launch",
                 "resume_failed": "bad ckpt"}


def failure_text(job: Mapping[str, Any]) -> str:
    """The failure column: the class in at most 9 characters (`exit 3` for a non-zero exit,
    with its code when the attempt recorded one); the details screen has it in full."""
    cls = failure_class(job)
    if cls == "exit_nonzero":
        history = job.get("history") or []
        code = history[-1].get("exit_code") if history else None
        return f"exit {code}" if isinstance(code, int) and len(str(code)) <= 4 else "exit≠0"
    return FAILURE_SHORT.get(cls, cls)


def id_width(ids: Iterable[str]) -> int:
    """The id column as wide as the longest id and an edit mark, within the column's width."""
    longest = max((len(job_id) for job_id in ids), default=0) + len(EDITED_MARK)
    return max(ID_WIDTH_MIN, min(COLUMNS[0].width or 24, longest))


def single_line(text: str, width: int = LAST_LINE_WIDTH) -> str:
    """One printable line: control characters (and markup brackets' effect) kept out."""
    head = text.strip()[: width + 1]  # one character in, one out: cut first, clean less
    clean = head if head.isprintable() else "".join(ch if ch.isprintable() else " "
                                                    for ch in head)
    return clean if len(clean) <= width else clean[: width - 1] + "…"


EDITED_MARK = " ✎"


def edited(job: Mapping[str, Any]) -> bool:
    """A person changed its command (edit, or a reload of the manifest file)."""
    return any(isinstance(e, Mapping) and e.get("kind") in ("edit", "reload") and e.get("old")
               for e in job.get("edits") or ())


def stalled(job: Mapping[str, Any]) -> bool:
    """Running, but hang detection says it has stalled."""
    return job.get("status") == "running" and job.get("stalled_since") is not None


def progress_bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """A bar of `width` cells, to an eighth of a cell (the rest shaded, as the GPU bars)."""
    eighths = max(0, min(width * 8, int(fraction * width * 8)))
    full, part = divmod(eighths, 8)
    return ("█" * full + (BAR_EIGHTHS[part] if part else "")).ljust(width, "░")


def progress_text(pace: Pace | None) -> str:
    """`45% ██▎░░ 12m`: how far a running job says it is, and how long it has left."""
    if pace is None:
        return ""
    eta = format_short(pace.remaining_s)
    return f"{int(pace.fraction * 100):>3}% {progress_bar(pace.fraction)}{' ' + eta if eta else ''}"


def job_cells(job: Mapping[str, Any], *, project: str, now: float, max_attempts: int,
              metric: str = "", pace: Pace | None = None,
              last_width: int = LAST_LINE_WIDTH, shared: int = 0, host: bool = True) -> Cells:
    """The row's plain-text cells, in COLUMNS order (`metric`: the metric column's text;
    `pace`: a running job's progress, from the run view; `shared`: how many of our jobs share
    its GPU; `host`: False where the host:gpu column shows the GPUs only). A stalled job
    reads `stalled`, with how long its log has been silent ahead of its last line; a running
    job far slower than its siblings (pace.py) reads `slow`."""
    status = str(job.get("status", ""))
    reason = str(job.get("reason") or "")
    # a waiting job's last line is a past attempt's: why it waits now comes first; a killed
    # job's is what it printed before the kill: why it ended comes first
    last = (reason if status in REASON_FIRST else "") or job.get("last_line") or reason
    priority = int(job.get("priority") or 0)
    if stalled(job):
        status = "stalled"
        silent = job.get("silent_since") or job.get("stalled_since") or now
        last = f"silent {format_duration(now - float(silent))} · {last}"
    elif status == "running" and pace is not None and pace.slow:
        status = "slow"
    return (
        str(job.get("id", "")) + (EDITED_MARK if edited(job) else ""),
        project,
        str(job.get("phase", "")),
        status,
        failure_text(job),
        progress_text(pace),
        metric,
        str(priority) if priority else "",
        where(job, shared, host=host),
        attempt_text(job, max_attempts),
        format_duration(job_duration(job, now)),
        single_line(str(last), last_width),
    )


def changed_columns(old: Cells | None, new: Cells) -> list[int]:
    """Indexes of the cells that differ (all of them for a new row)."""
    if old is None:
        return list(range(len(new)))
    return [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]


STATUS_ORDER = {name: i for i, name in enumerate(
    ("running", "launching", "failed_oom", "stuck", "blocked", "killed", "pending", "held",
     "completed", "pruned"))}


def sort_value(column: str, job: Mapping[str, Any], now: float,
               project: str = "") -> tuple[Any, ...]:
    """A key that sorts a column the way a person expects (durations by length, statuses by
    urgency), with the id as a tie-breaker."""
    job_id = str(job.get("id", ""))
    if column == "project":
        return (project, job_id)
    if column == "status":
        return (STATUS_ORDER.get(str(job.get("status")), 99), job_id)
    if column == "duration":
        return (job_duration(job, now) or -1.0, job_id)
    if column == "priority":
        return (-int(job.get("priority") or 0), job_id)
    if column == "attempt":
        return (int(job.get("attempts") or 0), job_id)
    if column == "where":
        return (str(job.get("host") or "~"), tuple(job.get("gpus") or ()), job_id)
    if column == "failure":
        return (failure_class(job) or "~", job_id)
    if column == "last_line":
        return (str(job.get("last_line") or ""), job_id)
    if column == "progress":
        fraction = progress_fraction(str(job.get("last_line") or "")) \
            if job.get("status") in LIVE_STATUSES else None
        return (-1.0 if fraction is None else fraction, job_id)
    return (str(job.get(column, "")), job_id)
