"""The reading of who writes a job's or an attempt's fields (tests/support/field_writes.py,
which tests/unit/test_layers.py runs over eq_tui/): every way of writing is caught, and the same
names on other classes are not."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from tests.support.field_writes import writes

ROOT = Path(__file__).resolve().parents[2]
MODEL = (ROOT / "eq_tui" / "api" / "model.py").read_text()
HEAD = "from eq_tui.api.model import Attempt, JobState\n"


def found(code: str) -> list[str]:
    return [w.code for w in writes({"m.py": HEAD + dedent(code)}, model=MODEL)]


@pytest.mark.parametrize("code", [
    "def f(job: JobState) -> None:\n    job.status = 'x'\n",
    "def f(job: JobState) -> None:\n    job.reason = None\n",
    "def f(job: JobState) -> None:\n    job.mem_escalation += 1\n",
    "def f(job: JobState) -> None:\n    job.reason, job.retry_at = None, None\n",
    "def f(job: JobState) -> None:\n    setattr(job, 'priority', 3)\n",
    "def f(job: JobState) -> None:\n    del job.spec\n",
    "def f(job: JobState) -> None:\n    current = job.current\n    current.exit_code = 3\n",
    "def f(job: JobState | None) -> None:\n    if job:\n        job.current.start = 1.0\n",
    "def f(job: JobState) -> None:\n    job.history[-1].peak_mib = 1\n",
    "def f(job: JobState) -> None:\n    job.retries_by_class['lost'] = 1\n",
    "def f(job: JobState) -> None:\n    job.edits.append({})\n",
    "def f(job: JobState) -> None:\n    edits = job.edits\n    edits.append({})\n",
    "def f(job: JobState) -> None:\n    job.failure.detail = 'x'\n",
    "def f(job: JobState) -> None:\n    job.current.close(3.0)\n",
    "def f(job: JobState) -> None:\n    job.change_cmd('y')\n",
    "def f(a: Attempt) -> None:\n    a.cleanup = 'x'\n",
    "def f(ledger: object) -> None:\n    for job in ledger.jobs.values():\n"
    "        job.last_line = ''\n",
    "def f(ctx: object, key: str) -> None:\n    job = ctx.ledger.jobs.get(key)\n"
    "    if job is not None:\n        job.metrics = {}\n",
    "def f(job: JobState) -> None:\n    a = next((a for a in job.history if a.n == 1), None)\n"
    "    a.peak_mib = 1\n",
    "def f(jobs: list[JobState]) -> None:\n    for job in sorted(jobs, key=str):\n"
    "        job.priority = 1\n",
    "def f(jobs: dict[str, JobState]) -> None:\n    for _key, job in jobs.items():\n"
    "        job.priority = 1\n",
    "def f(raw: dict) -> None:\n    job = JobState.from_json(raw)\n    job.phase = 'p'\n",
    "def f(raws: list) -> None:\n    jobs = {r['id']: JobState.from_json(r) for r in raws}\n"
    "    job = jobs.pop('a', None)\n    job.cmd = 'y'\n",
    "def make() -> JobState:\n    ...\ndef f() -> None:\n    make().origin = 'x'\n",
    "def f(job: JobState) -> None:\n    def inner() -> None:\n        job.reason = 'x'\n",
    "class C:\n    def m(self, job: JobState) -> None:\n        job.reason = 'x'\n",
])
def test_each_way_of_writing_a_field_is_found(code: str) -> None:
    assert len(found(code)) == 1, found(code)


@pytest.mark.parametrize("code", [
    "class Link:\n    def __init__(self) -> None:\n        self.reason = ''\n"
    "    def m(self) -> None:\n        self.reason = 'down'\n",
    "def f(link: object) -> None:\n    link.reason = 'down'\n",
    "def f(job: JobState, seen: dict) -> None:\n    seen[job.id] = job.status\n",
    "def f(job: JobState) -> None:\n    reason = job.reason\n    reason += '!'\n",
    "def f(job: JobState) -> JobState:\n    from dataclasses import replace\n"
    "    return replace(job, cmd='y')\n",
    "def f(job: JobState) -> None:\n    host = job.host\n    print(host)\n",
])
def test_other_objects_and_reads_are_not_writes(code: str) -> None:
    assert found(code) == []


def test_the_dataclasses_own_methods_are_their_tools_and_the_ledger_writes() -> None:
    """JobState.change_cmd and Attempt.close write their own fields: a call of one is a
    write (above), the methods themselves are not writers."""
    assert writes({"eq_tui/api/model.py": MODEL}, model=MODEL) == []
