"""The job filter typed after `/`: free text plus `status:`, `host:`, `phase:`, `project:` tokens.

Tokens of different keys must all match; several values of one key (`status:stuck,killed` or two
`status:` tokens) match any of them. Free text matches a substring of the id, command, reason or
last log line, case-insensitively.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FIELD_KEYS = ("status", "host", "phase", "project", "id", "failure")


@dataclass(frozen=True)
class JobFilter:
    text: tuple[str, ...] = ()
    fields: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.text and not self.fields

    def matches(self, job: Mapping[str, Any], project: str) -> bool:
        for key, wanted in self.fields.items():
            if _field_value(key, job, project) not in wanted:
                return False
        if self.text:
            haystack = " ".join(str(job.get(k) or "") for k in
                                ("id", "cmd", "reason", "last_line", "phase", "status")).lower()
            return all(word in haystack for word in self.text)
        return True


def _field_value(key: str, job: Mapping[str, Any], project: str) -> str:
    if key == "project":
        return project.lower()
    if key == "failure":
        failure = job.get("failure")
        return str(failure.get("class", "")).lower() if isinstance(failure, Mapping) else ""
    return str(job.get(key) or "").lower()


def parse_filter(query: str) -> JobFilter:
    text: list[str] = []
    fields: dict[str, set[str]] = {}
    for token in query.split():
        key, sep, value = token.partition(":")
        if sep and key.lower() in FIELD_KEYS and value:
            fields.setdefault(key.lower(), set()).update(
                v.lower() for v in value.split(",") if v)
        else:
            text.append(token.lower())
    return JobFilter(text=tuple(text), fields={k: frozenset(v) for k, v in fields.items()})
