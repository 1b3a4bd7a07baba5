"""Each stack's verbatim output (tests/fixtures/stacks/, every fixture naming its source in the
JSON beside it): the metrics and the number of evaluations as the stack printed them, the last
value (nan read as nan), and a progress that never goes backwards.

The expectations in the JSON files were counted by hand from what each log means (an
evaluation, not a redraw), never from our reader."""

from __future__ import annotations

import json
import math
from itertools import pairwise
from pathlib import Path

import pytest

from eq_tui.results.parse import log_lines, parse_log, read_log_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "stacks"
LOGS = sorted(FIXTURES.glob("*.log"))
STACKS = ("hf", "lightning", "keras2", "keras3", "torchtune", "timm", "nanogpt", "fairseq",
          "tqdm")


def expectation(log: Path) -> dict[str, object]:
    return json.loads(log.with_suffix(".json").read_text())


def test_every_stack_has_a_fixture_that_names_its_source() -> None:
    stacks = {log.name.split("_")[0] for log in LOGS}
    assert stacks >= set(STACKS), sorted(set(STACKS) - stacks)
    for log in LOGS:
        source = str(expectation(log).get("source") or "")
        assert source.strip(), f"{log.name} names no source"


def test_some_fixture_of_every_stack_diverges_to_nan() -> None:
    nan_stacks = set()
    for log in LOGS:
        metrics = expectation(log)["expect"]["metrics"]  # type: ignore[index]
        if any(str(m.get("last")) == "nan" for m in metrics.values()):  # type: ignore[union-attr]
            nan_stacks.add(log.name.split("_")[0])
    assert nan_stacks >= set(STACKS), sorted(set(STACKS) - nan_stacks)


@pytest.mark.parametrize("log", LOGS, ids=[log.stem for log in LOGS])
def test_the_metrics_and_reports_as_the_stack_printed_them(log: Path) -> None:
    text = log.read_bytes().decode("utf-8", errors="replace")
    metrics = parse_log(text.split("\n"))
    expected = expectation(log)["expect"]["metrics"]  # type: ignore[index]
    for name, want in expected.items():  # type: ignore[union-attr]
        assert name in metrics, f"{name} not read; read: {sorted(metrics)}"
        assert len(metrics[name]) == want["evaluations"], (name, metrics[name])
        last = metrics[name][-1]
        if str(want["last"]) == "nan":
            assert math.isnan(last), (name, last)
        else:
            assert last == pytest.approx(float(want["last"]), rel=1e-6), (name, last)


@pytest.mark.parametrize("log", LOGS, ids=[log.stem for log in LOGS])
def test_the_stack_is_recognised_by_itself(log: Path) -> None:
    stack = log.name.split("_")[0]
    text = log.read_bytes().decode("utf-8", errors="replace")
    seen = {read.stack for line in log_lines(text) if (read := read_log_line(line)).stack}
    if stack in ("keras2", "keras3"):
        assert seen & {"keras2", "keras3"}, seen
    else:
        assert stack in seen, seen


@pytest.mark.parametrize("log", LOGS, ids=[log.stem for log in LOGS])
def test_progress_never_goes_backwards_and_counts_the_whole_run(log: Path) -> None:
    """Fed line by line as the engine sees them, a job's progress never decreases; where the
    log states the run's total (`Epoch k/N`), it is read in the log's own unit."""
    from eq_tui.api.job_progress import JobProgress

    text = log.read_bytes().decode("utf-8", errors="replace")
    progress = JobProgress()
    seen: list[float] = []
    for at, line in enumerate(log_lines(text)):
        progress.observe(line, float(at))
        if progress.fraction is not None:
            seen.append(progress.fraction)
    assert all(b >= a for a, b in pairwise(seen)), seen
    assert all(0.0 <= f <= 1.0 for f in seen)
    want = expectation(log)["expect"]["progress"]  # type: ignore[index]
    if want.get("total"):  # type: ignore[union-attr]
        assert seen, "the log states its total, yet no progress was read"
        assert progress.unit == want["unit"] and progress.total == want["total"], (  # type: ignore[index]
            progress.unit, progress.total, progress.source)
