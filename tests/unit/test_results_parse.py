"""Metrics parsing: each shape, malformed input, NaN/inf, bounds."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from eq_tui.manifest.model import MetricsSpec
from eq_tui.results.collect import split_sections, wanted_files
from eq_tui.results.parse import (
    MAX_KEYS,
    bounded,
    finals,
    flatten,
    log_numbers,
    merge,
    parse_csv,
    parse_json,
    parse_jsonl,
    parse_log,
)

LIGHTNING = """epoch,step,train_loss,val_loss,val_acc
0,49,0.91,,
0,99,0.72,,
0,99,,0.65,0.71
1,149,0.55,,
1,199,,0.51,0.78
"""


def test_json_every_numeric_leaf_with_dotted_keys() -> None:
    text = '{"val": {"acc": 0.9, "per_class": [0.8, 1]}, "name": "x", "ok": true, "n": null}'
    assert parse_json(text) == {"val.acc": [0.9], "val.per_class.0": [0.8],
                                "val.per_class.1": [1.0]}


def test_json_strings_are_not_numbers_and_wandb_private_keys_go() -> None:
    assert parse_json('{"loss": "0.5", "acc": NaN}').keys() == {"acc"}
    summary = '{"_runtime": 12, "_step": 9, "_wandb": {"runtime": 12}, "val_acc": 0.91}'
    assert parse_json(summary, skip_private=True) == {"val_acc": [0.91]}


def test_json_that_is_not_json_is_nothing() -> None:
    assert parse_json('{"loss": 0.5') == {}
    assert parse_json("") == {}
    assert parse_json("[1, 2]") == {"0": [1.0], "1": [2.0]}


def test_jsonl_series_last_value_and_bad_lines_skipped() -> None:
    text = '{"step": 1, "loss": 0.9}\nnot json\n{"step": 2, "loss": 0.5, "acc": 0.7}\n[1]\n{"lo'
    metrics = parse_jsonl(text)
    assert metrics == {"step": [1.0, 2.0], "loss": [0.9, 0.5], "acc": [0.7]}
    assert finals(metrics) == {"step": 2.0, "loss": 0.5, "acc": 0.7}


def test_lightning_csv_sparse_rows() -> None:
    metrics = parse_csv(LIGHTNING)
    assert metrics["train_loss"] == [0.91, 0.72, 0.55]
    assert metrics["val_acc"] == [0.71, 0.78]
    assert metrics["epoch"] == [0.0, 0.0, 0.0, 1.0, 1.0]


def test_csv_rows_of_the_wrong_width_and_empty_input() -> None:
    assert parse_csv("a,b\n1,2\n3\n4,5,6\n7,8\n") == {"a": [1.0, 7.0], "b": [2.0, 8.0]}
    assert parse_csv("") == {}
    assert parse_csv('a\n"unterminated\n') == {}


def test_log_key_value_and_key_colon_value() -> None:
    line = "epoch 3/10 loss=0.4123 val_acc: 0.91 lr=1e-3 val/f1=0.5"
    assert log_numbers(line) == {"loss": 0.4123, "val_acc": 0.91, "lr": 0.001, "val/f1": 0.5}


def test_log_numbers_that_are_not_metrics() -> None:
    assert log_numbers("[fake-train] job=a attempt=1 pid=3 host=rtx seed=4") == {}
    assert log_numbers("listening on http://box:8080/x at 12:30:45 (45%)") == {}
    assert log_numbers("Tried to allocate 2.00 GiB") == {}


def test_log_nan_and_inf_are_kept() -> None:
    found = log_numbers("loss=nan grad=inf other=-inf")
    assert math.isnan(found["loss"]) and found["grad"] == math.inf and found["other"] == -math.inf


def test_log_series_and_carriage_returns() -> None:
    metrics = parse_log(["epoch 1 loss=0.9", "it 5 loss=0.8\rit 6 loss=0.7", "done"])
    assert metrics == {"loss": [0.9, 0.8, 0.7]}


def test_log_pattern_named_groups() -> None:
    pattern = re.compile(r"Val accuracy (?P<val_acc>[0-9.]+)% top5 (?P<top5>\S+)")
    metrics = parse_log(["Val accuracy 91.5% top5 99", "Val accuracy 92% top5 n/a"], pattern)
    assert metrics == {"val_acc": [91.5, 92.0], "top5": [99.0]}


def test_merge_first_source_wins() -> None:
    assert merge({"a": [1.0]}, {"a": [2.0], "b": [3.0]}) == {"a": [1.0], "b": [3.0]}


def test_bounded_keeps_first_and_last() -> None:
    series = [float(i) for i in range(1000)]
    kept = bounded(series, 64)
    assert len(kept) == 64 and kept[0] == 0.0 and kept[-1] == 999.0
    assert bounded([1.0, 2.0], 64) == [1.0, 2.0]


def test_many_keys_are_capped() -> None:
    assert len(flatten({f"k{i}": i for i in range(10 * MAX_KEYS)})) == MAX_KEYS


def test_what_to_read() -> None:
    auto = wanted_files(None, attempt_dir="/a", run_dir="/r", job_id="j", attempt=2)
    assert [w.path for w in auto] == ["/a/metrics.json", "/a/results.jsonl", "/a/metrics.csv",
                                      "/a/wandb-summary.json", "", "", "", "/a/log"]
    assert [(w.how, w.since) for w in auto if not w.path] == [
        ("find-hf", "/a"), ("find-pl", "/a"), ("find-tb", "/a")]  # the stacks' files in the cwd
    spec = MetricsSpec(json="${RUN_DIR}/out/${JOB_ID}_a${ATTEMPT}.json")
    assert [w.path for w in wanted_files(spec, attempt_dir="/a", run_dir="/r", job_id="j",
                                         attempt=2)] == ["/r/out/j_a2.json"]
    logged = wanted_files(MetricsSpec(csv="m.csv", log=True), attempt_dir="/a", run_dir="/r",
                          job_id="j", attempt=1)
    assert [(w.kind, w.path) for w in logged] == [("csv", "m.csv"), ("log", "/a/log")]


def test_sections_cannot_be_forged_without_the_boundary() -> None:
    text = "@@b file 0 5\n{\"a\": 1}\n@@x file 1 3\n\n@@b file 2 4\nx=1\n@@b end\n"
    assert split_sections(text, "@@b") == {0: '{"a": 1}\n@@x file 1 3\n', 2: "x=1"}


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_malformed_text_never_crashes(text: str) -> None:
    for parser in (parse_json, parse_jsonl, parse_csv):
        for series in parser(text).values():
            assert all(isinstance(v, float) for v in series)
    for value in log_numbers(text).values():
        assert isinstance(value, float)
    parse_log(text.splitlines(), re.compile(r"(?P<x>\S+)"))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["loss", "acc", "lr"]),
                                st.floats(allow_nan=True, allow_infinity=True) | st.integers(),
                                min_size=1), max_size=20))
def test_jsonl_round_trip_keeps_every_value(rows: list[dict[str, float]]) -> None:
    import json

    text = "\n".join(json.dumps(row) for row in rows)
    metrics = parse_jsonl(text)
    for key in ("loss", "acc", "lr"):
        expected = [float(row[key]) for row in rows if key in row]
        got = metrics.get(key, [])
        assert len(got) == len(expected)
        assert all((math.isnan(a) and math.isnan(b)) or a == b
                   for a, b in zip(got, expected, strict=True))


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True),
                       st.floats(allow_nan=False, allow_infinity=False, width=32), max_size=5))
def test_log_line_round_trip(values: dict[str, float]) -> None:
    values = {k: v for k, v in values.items() if k not in ("pid", "seed", "gpu", "job", "host",
                                                           "port", "rank", "node")}
    line = " ".join(f"{k}={v!r}" for k, v in values.items())
    assert log_numbers(line) == {k: float(repr(v)) for k, v in values.items()}


_METRIC_KEYS = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True)
_FINITE = st.floats(allow_nan=False, allow_infinity=False, width=32)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_METRIC_KEYS, _FINITE, min_size=1, max_size=5))
def test_a_metrics_json_reads_back_every_value(values: dict[str, float]) -> None:
    """The positive half for parse_json (the never-crashes property passes on `{}` alone)."""
    import json

    assert parse_json(json.dumps(values)) == {k: [float(v)] for k, v in values.items()}


@settings(max_examples=100, deadline=None)
@given(st.lists(_METRIC_KEYS, min_size=1, max_size=4, unique=True),
       st.lists(st.lists(_FINITE, min_size=4, max_size=4), min_size=1, max_size=6))
def test_a_metrics_csv_reads_back_every_column(header: list[str],
                                               rows: list[list[float]]) -> None:
    """The positive half for parse_csv: each column's values, in order."""
    text = ",".join(header) + "\n" + "\n".join(
        ",".join(repr(v) for v in row[:len(header)]) for row in rows) + "\n"
    assert parse_csv(text) == {key: [float(row[i]) for row in rows]
                               for i, key in enumerate(header)}
