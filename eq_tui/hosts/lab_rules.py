"""Lab rules: an optional file on a GPU host that every eq-tui engine reads with its probe and
keeps — GPUs kept free or reserved for someone, at most N GPUs per user while others wait, hours
when a GPU is for interactive use, and the order to take free GPUs in.

The file is `/etc/eq-tui/rules.yaml` (or `$EQ_TUI_RULES` on the host, or the path a host entry's
`rules` names):

    keep_free: [7]                      # or [{gpus: [7], why: "for the demo"}]
    reserve:                            # only these users' eq-tui jobs take these GPUs
      - {gpus: [0, 1], for: [alice]}
    max_gpus_per_user: 4                # while another user's engine waits for GPUs here
    interactive:                        # kept free at these hours (the host's local time)
      - {gpus: [6, 7], hours: "09:00-19:00", days: [mon, tue, wed, thu, fri]}
    prefer: [3, 2, 1, 0]                # the order free GPUs are taken in

Rules are advice between colleagues: no root, no daemon, nothing stops a process that never
asked. A file that cannot be read as rules is a warning, and the engine keeps running as if
there were none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

RULES_FILE = "/etc/eq-tui/rules.yaml"
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_HOURS = re.compile(r"(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})")
KEYS = frozenset({"keep_free", "reserve", "max_gpus_per_user", "interactive", "prefer"})


class RulesError(ValueError):
    """The rules file says something that is not a rule (the engine then keeps none)."""


@dataclass(frozen=True)
class Window:
    """GPUs kept for interactive use from `start` to `end` (minutes after midnight; an end
    before the start wraps past midnight) on `days` (1 Monday .. 7 Sunday)."""

    gpus: frozenset[int]
    start: int
    end: int
    days: frozenset[int]
    text: str  # as written: "09:00-19:00"

    def open_at(self, minute: int, weekday: int) -> bool:
        if self.start <= self.end:
            return weekday in self.days and self.start <= minute < self.end
        # past midnight: the evening of a listed day, or the morning after it
        before = (weekday - 2) % 7 + 1
        return (weekday in self.days and minute >= self.start) or (
            before in self.days and minute < self.end)


@dataclass(frozen=True)
class LabRules:
    keep_free: Mapping[int, str] = field(default_factory=dict)  # GPU -> why
    reserved: Mapping[int, frozenset[str]] = field(default_factory=dict)  # GPU -> for whom
    max_gpus_per_user: int | None = None
    interactive: tuple[Window, ...] = ()
    prefer: tuple[int, ...] = ()


@dataclass(frozen=True)
class HostLab:
    """What a probe read for the lab's rules: the rules (None: no file, or a file that is not
    rules: `warning` says why), who we are on the host, the host's clock when the rules need it
    (minute of the day, weekday 1-7), and the other users' engines that wait for GPUs there."""

    rules: LabRules | None = None
    path: str = ""
    warning: str = ""
    user: str = ""
    clock: tuple[int, int] | None = None
    waiting: frozenset[str] = frozenset()  # users whose engines wait for GPUs here
    # the file's cksum ("CRC.SIZE"; "-": no file; "": not known): what a launch rechecks
    checksum: str = ""


# ---- reading ---------------------------------------------------------------------------------

def _gpus(value: Any, where: str) -> frozenset[int]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0
                            for g in items):
        raise RulesError(f"{where}: GPUs are a list of indices, e.g. [0, 1]")
    return frozenset(items)


def _entries(value: Any, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise RulesError(f"{where}: a list of mappings, e.g. [{{gpus: [0], ...}}]")
    return value


def _window(entry: Mapping[str, Any], where: str) -> Window:
    extra = set(entry) - {"gpus", "hours", "days"}
    if extra:
        raise RulesError(f"{where}: unknown key {sorted(extra)[0]!r}")
    hours = str(entry.get("hours", ""))
    found = _HOURS.fullmatch(hours.replace(" ", ""))
    if found is None:
        raise RulesError(f"{where}.hours: HH:MM-HH:MM, e.g. \"09:00-19:00\"")
    h1, m1, h2, m2 = (int(x) for x in found.groups())
    if h1 > 24 or h2 > 24 or m1 > 59 or m2 > 59:
        raise RulesError(f"{where}.hours: {hours!r} is not a time of day")
    days_value = entry.get("days", list(DAYS))
    days = days_value if isinstance(days_value, list) else [days_value]
    names = [str(day).lower()[:3] for day in days]
    if not names or any(name not in DAYS for name in names):
        raise RulesError(f"{where}.days: a list of mon, tue, wed, thu, fri, sat, sun")
    return Window(_gpus(entry.get("gpus"), f"{where}.gpus"), h1 * 60 + m1, h2 * 60 + m2,
                  frozenset(DAYS.index(name) + 1 for name in names), hours.replace(" ", ""))


def parse_rules(text: str) -> LabRules:
    """The rules a file says; RulesError for anything that is not one."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RulesError(f"{where}{problem}") from None
    if data is None:
        return LabRules()
    if not isinstance(data, dict):
        raise RulesError("the file is not a mapping of rules")
    unknown = set(data) - KEYS
    if unknown:
        raise RulesError(f"unknown rule {sorted(map(str, unknown))[0]!r} "
                         f"(known: {', '.join(sorted(KEYS))})")
    keep: dict[int, str] = {}
    raw_keep = data.get("keep_free") or []
    if isinstance(raw_keep, int) and not isinstance(raw_keep, bool):
        raw_keep = [raw_keep]
    if isinstance(raw_keep, list) and all(isinstance(g, int) for g in raw_keep):
        keep = dict.fromkeys(_gpus(raw_keep, "keep_free") if raw_keep else (), "")
    else:
        for i, entry in enumerate(_entries(raw_keep, "keep_free")):
            for gpu in _gpus(entry.get("gpus"), f"keep_free[{i}].gpus"):
                keep[gpu] = str(entry.get("why") or "")
    reserved: dict[int, frozenset[str]] = {}
    for i, entry in enumerate(_entries(data.get("reserve") or [], "reserve")):
        users = entry.get("for")
        users = users if isinstance(users, list) else [users]
        if not users or not all(isinstance(u, str) and u for u in users):
            raise RulesError(f"reserve[{i}].for: a list of user names")
        for gpu in _gpus(entry.get("gpus"), f"reserve[{i}].gpus"):
            reserved[gpu] = reserved.get(gpu, frozenset()) | frozenset(users)
    most = data.get("max_gpus_per_user")
    if most is not None and (not isinstance(most, int) or isinstance(most, bool) or most < 1):
        raise RulesError("max_gpus_per_user: a whole number, at least 1")
    windows = tuple(_window(entry, f"interactive[{i}]")
                    for i, entry in enumerate(_entries(data.get("interactive") or [],
                                                       "interactive")))
    prefer = data.get("prefer") or []
    order = tuple(prefer) if isinstance(prefer, list) else ()
    if prefer and (len(_gpus(prefer, "prefer")) != len(order)):
        raise RulesError("prefer: each GPU once")
    return LabRules(keep, reserved, most, windows, order)


def needs_clock(text: str) -> bool:
    """Whether the rules need the host's clock (interactive hours): only then does the probe
    read it."""
    return "interactive" in text


def parse_lab(lines: Sequence[str] | None, *, path: str, user: str, clock: str | None,
              waiting: Iterable[str], checksum: str = "") -> HostLab:
    """The probe's `rules` section (the file's lines; None: no readable file) and what came
    with it (`checksum`: its `rules_sum`, cksum's "CRC SIZE"). A file that is not rules gives
    no rules and a warning that says why."""
    when = _clock(clock)
    people = frozenset(u for u in waiting if u and u != user)
    summed = "-" if lines is None else ".".join(checksum.split()[:2])
    if lines is None:
        return HostLab(None, path, "", user, when, people, summed)
    try:
        rules = parse_rules("\n".join(lines))
    except RulesError as exc:
        return HostLab(None, path, f"lab rules {path} ignored, none apply until it is fixed: "
                                   f"{exc}", user, when, people, summed)
    return HostLab(rules, path, "", user, when, people, summed)


def _clock(text: str | None) -> tuple[int, int] | None:
    """`HH:MM D` (D: 1 Monday .. 7 Sunday) -> (minute of the day, weekday)."""
    if not text:
        return None
    found = re.fullmatch(r"(\d{1,2}):(\d{2}) ([1-7])", text.strip())
    if found is None:
        return None
    return int(found[1]) * 60 + int(found[2]), int(found[3])


# ---- keeping them --------------------------------------------------------------------------

def closed_gpus(lab: HostLab, host: str) -> dict[int, str]:
    """GPU -> why no eq-tui job of ours may take it now: kept free, reserved for others, kept
    for interactive use at this hour."""
    rules = lab.rules
    if rules is None:
        return {}
    closed: dict[int, str] = {}
    for gpu, why in rules.keep_free.items():
        closed[gpu] = f"{host} keeps GPU {gpu} free" + (f" ({why})" if why else "")
    for gpu, users in rules.reserved.items():
        if lab.user not in users and gpu not in closed:
            closed[gpu] = f"{host} reserves GPU {gpu} for {', '.join(sorted(users))}"
    if lab.clock is not None:
        minute, weekday = lab.clock
        for window in rules.interactive:
            if window.open_at(minute, weekday):
                for gpu in sorted(window.gpus - set(closed)):
                    closed[gpu] = (f"{host} keeps GPU {gpu} free for interactive use "
                                   f"({window.text})")
    return closed


def user_cap(lab: HostLab, host: str, held: Iterable[int]) -> str | None:
    """Why we may take no GPU we do not hold already: we hold max_gpus_per_user of this host's
    GPUs (all our engines, by their claims) while another user's engine waits here."""
    rules = lab.rules
    most = rules.max_gpus_per_user if rules is not None else None
    count = len(set(held))
    if most is None or count < most or not lab.waiting:
        return None
    return (f"{host} allows {most} GPU(s) per user while others wait "
            f"({', '.join(sorted(lab.waiting))}); {lab.user or 'you'} hold {count}")


def preferred(order: Sequence[int], gpus: Sequence[int]) -> list[int]:
    """The GPUs in the rules' order of preference, the ones it does not name after them."""
    rank = {gpu: i for i, gpu in enumerate(order)}
    return sorted(gpus, key=lambda gpu: (rank.get(gpu, len(rank)), gpu))
