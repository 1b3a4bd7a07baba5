"""The chaos figures in the docs are the record's (tests/chaos/figures.py), none typed by
hand."""

from __future__ import annotations

import json

from tests.chaos.figures import DOCS, RECORD, ROOT, blocks, render


def test_every_quoted_chaos_figure_is_the_records() -> None:
    run = json.loads(RECORD.read_text())
    assert run["verdict"]["ok"] and run["verdict"]["enough_evidence"]
    seen = set()
    for name in DOCS:
        text = (ROOT / name).read_text()
        assert blocks(render(text, run)) == blocks(text), name
        seen |= set(blocks(text))
    assert seen == {"readme", "testing", "reliability"}
