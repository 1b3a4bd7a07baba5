"""Who held which GPU when, from the hosts' own records: each attempt's `start` and `end`
(written by its wrapper on the host) and the line its job printed first (`BOOKED host=H gpus=G`,
from the host's own environment), never the engines' state.

For several engines on the same hosts (several users, several projects): a double booking is two
attempts of different engines on one GPU at one moment (each engine keeps its own jobs apart).
"""

from __future__ import annotations

import math
import pwd
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from tests.support.sshbed import OTHER_USER, USER, SshBed

# what a job prints first: where it was put, in the host's own words
BOOKED_CMD = 'echo "BOOKED host=$EQ_FAKE_HOST gpus=$CUDA_VISIBLE_DEVICES"'
_BOOKED = re.compile(r"^BOOKED host=(\S+) gpus=([0-9,]+)$", re.MULTILINE)


@dataclass(frozen=True)
class Booking:
    host: str
    gpu: int
    engine: str  # "<user>/<project>-<token>": whose
    job: str
    attempt: int
    start: float
    end: float  # math.inf while it runs


def _first_line(path: Path) -> str:
    try:
        return path.read_text().split("\n", 1)[0].strip()
    except OSError:
        return ""


def bookings(users: Iterable[str], projects: Iterable[str], *,
             since: float = 0.0) -> list[Booking]:
    """Every attempt of these projects that started (its `start` record) at or after `since`
    under the users' eq-tui log roots, one booking per GPU it was given."""
    found = []
    for user in users:
        home = Path(pwd.getpwnam(user).pw_dir)
        starts = [path for project in projects
                  for path in home.glob(f".eq-tui/{project}-*/logs/*/a*/start")]
        for start_file in starts:
            attempt_dir = start_file.parent
            try:
                start = float(_first_line(start_file))
            except ValueError:
                continue
            if start < since:
                continue
            end_text = _first_line(attempt_dir / "end")
            end = float(end_text) if end_text else math.inf
            try:
                log = (attempt_dir / "log").read_text(errors="replace")
            except OSError:
                continue
            booked = _BOOKED.search(log)
            if booked is None:
                continue
            run = attempt_dir.parent.parent.parent.name  # <project>-<token>
            for gpu in booked[2].split(","):
                found.append(Booking(host=booked[1], gpu=int(gpu), engine=f"{user}/{run}",
                                     job=attempt_dir.parent.name,
                                     attempt=int(attempt_dir.name[1:]), start=start, end=end))
    return sorted(found, key=lambda b: (b.host, b.gpu, b.start))


def double_bookings(found: Sequence[Booking]) -> list[tuple[Booking, Booking]]:
    """Pairs of attempts of different engines on the same GPU at the same moment."""
    pairs = []
    for a, b in combinations(found, 2):
        if (a.host, a.gpu) == (b.host, b.gpu) and a.engine != b.engine \
                and a.start < b.end and b.start < a.end:
            pairs.append((a, b))
    return pairs


def most_claimed(found: Sequence[Booking], mib_of: Mapping[str, int]) -> dict[tuple[str, int],
                                                                            int]:
    """(host, GPU) -> the most MiB the estimates of the attempts on it at one moment added to."""
    by_gpu: dict[tuple[str, int], list[Booking]] = {}
    for booking in found:
        by_gpu.setdefault((booking.host, booking.gpu), []).append(booking)
    most = {}
    for key, group in by_gpu.items():
        edges = sorted(edge for b in group
                       for edge in ((b.start, mib_of[b.job]), (b.end, -mib_of[b.job])))
        now = top = 0
        for _, step in edges:  # an end sorts before a start at the same instant
            now += step
            top = max(top, now)
        most[key] = top
    return most


def gpu_time_shares(found: Sequence[Booking], window: tuple[float, float],
                    mib_of: Mapping[str, int] | None = None) -> dict[str, float]:
    """engine -> its part of the GPU time all engines held within `window` (wall-clock start,
    stop): GPU-seconds (a job on two GPUs counts twice), or with `mib_of` (job -> its estimate)
    MiB-seconds, the share of a packed GPU's memory a job held for as long as it ran. An engine
    that held nothing in the window is 0.0 (every engine with a booking is named)."""
    start, stop = window
    if stop <= start:
        raise AssertionError(f"an empty window: {start:.2f} >= {stop:.2f}")
    held = {b.engine: 0.0 for b in found}
    for b in found:
        weight = mib_of[b.job] if mib_of is not None else 1
        seconds = max(0.0, min(b.end, stop) - max(b.start, start))
        held[b.engine] += weight * seconds
    total = sum(held.values()) or 1.0
    return {engine: seconds / total for engine, seconds in held.items()}


def taken_while_behind(found: Sequence[Booking], taker: str, waiter: str,
                       window: tuple[float, float], mib_of: Mapping[str, int] | None = None,
                       slack: float = 3.0) -> list[Booking]:
    """The `taker` engine's bookings (engine names start with it) that started within `window`
    on a host where the `waiter` engine held less than the taker just then (GPUs, or with
    `mib_of` MiB): a freed GPU or room the taker kept while the other, waiting, held less
    there; fair turns give it to the one that holds less. The records lag the claims the
    launch weighed (a start is written up to `slack` s after its claim), so each count leans
    the taker's way: the waiter held every booking of its there that ran within `slack` of the
    start, the taker only its others that ran from `slack` before the start to past it."""
    taken = []
    for b in found:
        if not b.engine.startswith(taker) or not window[0] <= b.start < window[1]:
            continue
        on_host = [o for o in found if o.host == b.host and o is not b]
        waiter_held = sum(_weight(o, mib_of) for o in on_host if o.engine.startswith(waiter)
                          and o.start <= b.start + slack and o.end >= b.start - slack)
        taker_held = sum(_weight(o, mib_of) for o in on_host if o.engine.startswith(taker)
                         and o.start <= b.start - slack and o.end > b.start)
        if waiter_held < taker_held:
            taken.append(b)
    return taken


def _weight(booking: Booking, mib_of: Mapping[str, int] | None) -> int:
    return mib_of[booking.job] if mib_of is not None else 1


def timeline(found: Sequence[Booking]) -> str:
    """The bookings in order of start, seconds after the first: for a failing test's message."""
    if not found:
        return "no booking"
    t0 = min(b.start for b in found)
    return "\n".join(f"{b.engine} {b.job} a{b.attempt} {b.host}:{b.gpu} "
                     f"{b.start - t0:.2f}-{b.end - t0:.2f}"
                     for b in sorted(found, key=lambda b: b.start))


def two_user_boxes(gpu_mib: int) -> SshBed:
    """The beds where two users share hosts: two sshd boxes of two simulated GPUs each, both
    users able to log in to both."""
    return SshBed.create([("box1", 2, gpu_mib, "Sim RTX"), ("box2", 2, gpu_mib, "Sim RTX")],
                         users=(USER, OTHER_USER))
