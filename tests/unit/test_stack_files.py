"""The files the stacks write, read from their verbatim copies (tests/fixtures/files/README.md
names each source): HF Trainer's trainer_state.json, Lightning's metrics.csv, and TensorBoard
event files written by tensorboard's own writer."""

from __future__ import annotations

import base64
import math
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util

from eq_tui.results.stack_files import (
    decode_transport,
    parse_events,
    parse_lightning_csv,
    parse_trainer_state,
)

FILES = Path(__file__).parents[1] / "fixtures" / "files"


def fixture(name: str) -> str:
    return (FILES / name).read_text(encoding="utf-8")


def test_trainer_state_gives_a_series_per_key_one_value_per_entry() -> None:
    metrics = parse_trainer_state(fixture("hf_trainer_state_eval.json"))
    # 48 training entries (every 50 of 2445 steps) and an evaluation per epoch
    assert len(metrics["loss"]) == len(metrics["learning_rate"]) == len(metrics["grad_norm"]) == 48
    assert metrics["eval_accuracy"] == [0.9097328830211852, 0.907276634940129,
                                        0.9180227202947497]
    assert metrics["eval_loss"][-1] == 0.3082576394081116
    assert metrics["eval_runtime"] == [175.9898, 184.8174, 172.096]  # kept, as in the log
    assert metrics["loss"][0] == 0.9918614959716797
    assert "epoch" not in metrics and "step" not in metrics  # positions
    assert "best_metric" not in metrics and "global_step" not in metrics  # only log_history


def test_trainer_state_train_summary_is_one_value_each() -> None:
    metrics = parse_trainer_state(fixture("hf_trainer_state_train.json"))
    assert len(metrics["loss"]) == 51 and metrics["loss"][-1] == 0.1636
    assert metrics["train_loss"] == [0.3071320072440214]
    assert metrics["train_runtime"] == [5938.5496]
    assert metrics["total_flos"] == [1.18478524985856e+17]
    assert not any(key in metrics for key in ("epoch", "step", "max_steps"))


def test_trainer_state_cut_to_its_tail_keeps_the_entries_it_holds() -> None:
    text = fixture("hf_trainer_state_eval.json")
    cut = text.split("\n", 1)[0] + "\n" + text[-3000:]  # what a bounded read sends
    metrics = parse_trainer_state(cut)
    assert metrics["eval_accuracy"] == [0.9180227202947497]
    assert metrics["loss"][-1] == 0.13515027046203612
    whole = parse_trainer_state(text)
    assert metrics["loss"] == whole["loss"][-len(metrics["loss"]):]
    assert "should_save" not in metrics  # the callbacks' state after log_history is not an entry


def test_trainer_state_nan_as_json_writes_it() -> None:
    # json.dump writes a diverged loss as NaN
    text = fixture("hf_trainer_state_train.json").replace('"loss": 0.1636', '"loss": NaN')
    assert math.isnan(parse_trainer_state(text)["loss"][-1])


def test_trainer_state_junk_gives_nothing() -> None:
    assert parse_trainer_state("") == {}
    assert parse_trainer_state('{"log_history": 3}') == {}
    assert parse_trainer_state('{"log_history": [1, "x", {"loss": true}]}') == {}


def test_lightning_metrics_csv_rows_with_empty_cells() -> None:
    metrics = parse_lightning_csv(fixture("lightning_metrics_val.csv"))
    assert metrics == {"train_loss": [0.21007005870342255, 0.19502906501293182],
                       "val_loss": [0.21559028327465057, 0.14366206526756287]}


def test_lightning_metrics_csv_with_a_learning_rate_monitor_row() -> None:
    metrics = parse_lightning_csv(fixture("lightning_metrics_lr.csv"))
    assert metrics["lr-Adam"] == [0.003]
    assert len(metrics["train_loss"]) == len(metrics["train_mse"]) == 73
    assert metrics["train_loss"][-1] == 0.2506627142429352
    assert "epoch" not in metrics and "step" not in metrics


def test_lightning_nan_cell_is_nan() -> None:
    # the writer puts str(float): a diverged value is `nan`
    text = fixture("lightning_metrics_val.csv").replace("0.14366206526756287", "nan")
    assert math.isnan(parse_lightning_csv(text)["val_loss"][-1])


def write_events(logdir: Path) -> bytes:
    """An event file as torch's SummaryWriter (simple_value) and tf.summary (a scalar tensor of
    the `scalars` plugin, its metadata with the tag's first value only) write scalars."""
    writer = EventFileWriter(str(logdir))
    for step, (loss, acc) in enumerate([(0.9, 0.5), (0.6, 0.7), (float("nan"), 0.75)], 1):
        values = [summary_pb2.Summary.Value(tag="train/loss", simple_value=loss),
                  summary_pb2.Summary.Value(tag="epoch", simple_value=step)]
        acc_value = summary_pb2.Summary.Value(tag="val/acc",
                                              tensor=tensor_util.make_tensor_proto(acc))
        if step == 1:
            acc_value.metadata.plugin_data.plugin_name = "scalars"
        text = summary_pb2.Summary.Value(tag="note",
                                         tensor=tensor_util.make_tensor_proto("text"))
        text.metadata.plugin_data.plugin_name = "text"
        summary = summary_pb2.Summary(value=[*values, acc_value, text])
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
    writer.close()
    (path,) = logdir.glob("events.out.tfevents.*")
    return path.read_bytes()


def test_tensorboard_scalars_by_tag(tmp_path: Path) -> None:
    metrics = parse_events(write_events(tmp_path))
    assert metrics["train/loss"][:2] == [0.8999999761581421, 0.6000000238418579]  # float32
    assert math.isnan(metrics["train/loss"][2])
    assert metrics["val/acc"] == [0.5, 0.699999988079071, 0.75]
    assert set(metrics) == {"train/loss", "val/acc"}  # epoch is a position, text no scalar


def test_tensorboard_tail_of_a_file_resyncs_on_a_record(tmp_path: Path) -> None:
    data = write_events(tmp_path)
    tail = data[len(data) // 2:]
    metrics = parse_events(tail, cut=True)
    assert metrics["val/acc"][-1] == 0.75
    assert len(metrics["val/acc"]) < 3
    # a last record still being written is left for the next read
    assert parse_events(data[:-3])["val/acc"] == [0.5, 0.699999988079071]


def test_binary_transport_decodes_both_encodings(tmp_path: Path) -> None:
    data = write_events(tmp_path)
    wrapped = "\n".join(base64.b64encode(data).decode()[i:i + 76]
                        for i in range(0, len(data) * 2, 76))
    assert decode_transport("b64", wrapped) == data
    od = "\n".join(" " + " ".join(f"{b:02x}" for b in data[i:i + 16])
                   for i in range(0, len(data), 16))
    assert decode_transport("hex", od) == data
    assert decode_transport("hex", "zz") == b""


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600), st.text(max_size=400))
def test_malformed_input_never_raises(data: bytes, text: str) -> None:
    for series in parse_events(data, cut=True).values():
        assert all(isinstance(v, float) for v in series)
    for parser in (parse_trainer_state, parse_lightning_csv):
        for series in parser(text).values():
            assert all(isinstance(v, float) for v in series)
