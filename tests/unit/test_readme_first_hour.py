"""What README.md tells a new user holds (issue 46): every status word in its glossary, the
completion install line that works on a fresh account, the demo's results table with the columns
`eq-tui results` prints, and what `m` adds first."""

from __future__ import annotations

import re
from pathlib import Path

from eq_tui.api.model import JobStatus
from eq_tui.results.group import group
from eq_tui.results.records import make_record
from eq_tui.results.render import render_table

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_every_status_word_is_in_the_glossary() -> None:
    start = README.index("**The status words**")
    glossary = README[start:README.index("\n\n", README.index("| word |", start))]
    words = set(re.findall(r"^\| `(\w+)` \|", glossary, flags=re.MULTILINE))
    assert {str(status) for status in JobStatus} <= words, words
    assert {"stalled", "slow"} <= words  # the table's own words for a running job


def test_the_completion_line_makes_its_folder_first() -> None:
    lines = README.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("eq-tui completion bash >"))
    folder = lines[at].split(">")[1].split()[0].rsplit("/", 1)[0]
    assert lines[at - 1].startswith(f"mkdir -p {folder}"), lines[at - 1]


def test_the_demo_table_has_the_columns_results_prints() -> None:
    block = README[README.index("```\nphase    lr    job"):]
    header = block.splitlines()[1].split()
    record = {**make_record(job_id="a", phase="p", params={"lr": "0.1"}, attempt=1,
                            status="completed", metrics={"val_acc": [0.5]}),
              "cost": {"gpu_s": 10.0, "energy_j": 100.0}}
    printed = render_table(group([record])).splitlines()[0]
    for column in ("GPU", "time", "energy", "notes"):
        assert column in printed.split() and column in header, (printed, header)
    assert "cost in all:" in block[:block.index("```", 4)]


def test_m_is_said_to_add_the_goal_metric_first() -> None:
    assert "`m` adds a metric column (`val_acc` first" in README
