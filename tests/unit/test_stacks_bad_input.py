"""The stacks' line readers on input no stack prints: junk, huge lines, huge dicts, keyword
keys. No traceback, bounded time (the engine's tick reads these lines), and what can be read
is read."""

from __future__ import annotations

import math
import os
import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from eq_tui.engine.tick.early_stop import line_value
from eq_tui.manifest.model import MetricsSpec
from eq_tui.results.parse import log_lines, log_numbers, parse_log
from eq_tui.results.stacks import MAX_LINE_KEYS, Reports, number_text, read_line


def test_binary_junk_is_read_as_nothing() -> None:
    junk = os.urandom(1 << 16).decode("utf-8", errors="replace")
    metrics = parse_log([junk])
    assert all(isinstance(v, float) for series in metrics.values() for v in series)


def test_a_ten_megabyte_line_is_read_in_bounded_time() -> None:
    line = "loss=0.5 " + "x" * (10 << 20) + " acc=0.9"
    started = time.process_time()
    found = log_numbers(line)
    spent = time.process_time() - started
    assert found == {"loss": 0.5}  # read up to MAX_LINE; the tail of a 10 MB line is not
    assert spent < 5.0, spent  # generous: a regex gone quadratic takes minutes here


def test_a_dict_line_with_ten_thousand_keys_is_capped() -> None:
    line = "{" + ", ".join(f"'k{i}': {i}.5" for i in range(10_000)) + "}"
    read = read_line(line)
    assert 0 < len(read.metrics) <= MAX_LINE_KEYS
    assert read.metrics["k0"] == 0.5


def test_metrics_named_like_python_keywords_are_plain_names() -> None:
    read = read_line("{'lambda': 0.3, 'class': 2, 'None': 1.5, 'import': nan, 'epoch': 2.0}")
    assert read.metrics["lambda"] == 0.3 and read.metrics["class"] == 2.0
    assert read.metrics["None"] == 1.5 and math.isnan(read.metrics["import"])
    assert read.position == "epoch 2"
    assert log_numbers("lambda=0.5 def: 3 __import__=1") == {"lambda": 0.5, "def": 3.0,
                                                             "__import__": 1.0}


def test_a_dict_line_is_never_evaluated() -> None:
    # a literal read, never eval: code in a dict line is text, and a call is no number
    read = read_line("{'loss': __import__('os').system('false'), 'acc': 0.5}")
    assert read.metrics == {"acc": 0.5}


def test_thousands_separators_never_split_a_number() -> None:
    assert log_numbers("Number of trainable parameters = 66,955,010") == {
        "parameters": 66955010.0}
    assert log_numbers("  Num examples = 25,000") == {"examples": 25000.0}
    assert log_numbers("loss=0.5, acc=0.9") == {"loss": 0.5, "acc": 0.9}


def test_nan_and_inf_as_the_stacks_spell_them() -> None:
    for text in ("nan", "NaN", "nan.0", "-nan", "+nan"):
        value = number_text(text)
        assert value is not None and math.isnan(value), text
    assert number_text("inf.0") == math.inf and number_text("-inf") == -math.inf
    assert number_text("Infinity") == math.inf and number_text("-1.5e-3") == -0.0015
    assert number_text("1,234.5") == 1234.5 and number_text("12:30") is None


def test_name_colon_value_without_a_space() -> None:
    assert log_numbers("loss:0.5733 lr:2e-05 device cuda:0 at 12:30:45") == {
        "loss": 0.5733, "lr": 2e-05}
    assert log_numbers("see http://host:8080/x and tcp://10.0.0.1:29500") == {}


def test_keras_backspace_redraws_are_lines() -> None:
    text = ("Epoch 1/2\n" + "\b" * 40 + "\r 1/3 [=>....] - ETA: 1s - loss: 0.9" + "\b" * 40
            + "\r 3/3 [=====] - 1s 3ms/step - loss: 0.8 - val_loss: 0.7\n")
    lines = list(log_lines(text))
    assert "\b" not in "".join(lines)
    assert parse_log(text.splitlines()) == {"loss": [0.9, 0.8], "val_loss": [0.7]}


def test_a_pattern_reads_lightning_padded_nan() -> None:
    spec = MetricsSpec(pattern=r"val_loss=(?P<val_loss>\S+?)[,\]]")
    value = line_value("Epoch 2: 100%|█| 5/5 [00:01<00:00, v_num=0, val_loss=nan.0]",
                       "val_loss", spec)
    assert value is not None and math.isnan(value)


def test_a_pattern_with_a_back_reference_still_reads() -> None:
    pattern = re.compile(r"(?P<q>['\"])acc(?P=q): (?P<acc>[0-9.]+)")
    assert parse_log(["'acc': 0.5", "\"acc\": 0.6", "'acc\": 0.7"], pattern) == {
        "acc": [0.5, 0.6]}


def test_reports_once_per_position_or_per_change() -> None:
    reports = Reports()
    counted = []
    for line in ("epoch 1/3 loss=0.5", "epoch 1/3 loss=0.4",  # same epoch: one report
                 "epoch 2/3 loss=0.4",  # a new epoch, the same value: a report
                 " 10%|█ | 1/10 [00:00<00:01, loss=0.3]", " 20%|█ | 2/10 [00:00<00:01, loss=0.3]",
                 " 30%|█ | 3/10 [00:00<00:01, loss=nan]", " 40%|█ | 4/10 [00:00<00:01, loss=nan]"):
        counted.extend(reports.new(read_line(line)).get("loss", math.inf) for _ in [0])
    values = [v for v in counted if v != math.inf]
    assert values[:3] == [0.5, 0.4, 0.3] and len(values) == 4 and math.isnan(values[3])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=600))
def test_any_text_reads_as_floats(text: str) -> None:
    read = read_line(text)
    assert all(isinstance(v, float) for v in read.metrics.values())
    assert len(read.metrics) <= MAX_LINE_KEYS
    Reports().new(read)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["loss", "val_loss", "acc"]), min_size=1, max_size=30),
       st.integers(min_value=1, max_value=5))
def test_a_bar_redrawn_any_number_of_times_reports_each_value_once(
        names: list[str], redraws: int) -> None:
    """Property: a tqdm bar whose postfix shows a sequence of distinct evaluations, each
    redrawn `redraws` times, makes exactly one report per evaluation."""
    reports = Reports()
    made = 0
    for value, name in enumerate(names):
        for step in range(redraws):
            line = f" {step}%|█ | {step}/100 [00:01<00:02, 3.1it/s, {name}={value}.5]"
            made += len(reports.new(read_line(line)))
    assert made == len(names)


def test_lightning_rich_progress_bar() -> None:
    # lightning/pytorch/callbacks/progress/rich_progress.py: the bar, the counts, the times,
    # the rate, then MetricsTextColumn's `name: value` pairs
    read = read_line("Epoch 3/9  ━━━━━━━━━━━━━━━━━╸━━━━ 20/50 0:00:01 • 0:00:02 14.20it/s "
                     "v_num: 0 train_loss: 0.693 val_loss: nan")
    assert read.stack == "lightning" and read.redraw
    assert read.metrics["train_loss"] == 0.693 and math.isnan(read.metrics["val_loss"])
    assert "v_num" not in read.metrics
