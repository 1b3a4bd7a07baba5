"""The files the training stacks write beside a job, read as the stacks write them. Pure;
malformed input never raises.

- HF Trainer's `trainer_state.json` (transformers/trainer_callback.py, `TrainerState`;
  transformers/trainer.py, `Trainer.log`): `log_history` holds every logging call as a flat dict
  of the numbers logged plus `epoch` and `step` (`{**logs, "step": global_step}`), the train
  summary (`train_loss`, `train_runtime`, `total_flos`, ...) last.
- PyTorch Lightning's CSVLogger `metrics.csv` (lightning/fabric/loggers/csv_logs.py,
  `_ExperimentWriter`): a header of every key logged so far, a row per `log_metrics` call with its
  `step` and the `epoch` the trainer adds, cells empty where a key was not logged, nan as `nan`.
- TensorBoard event files (`events.out.tfevents.*`; tensorboard/summary/writer/record_writer.py
  for the framing, tensorboard/compat/proto/event.proto and summary.proto for the records): the
  scalars, `simple_value` (torch's SummaryWriter, tensorboardX) or a one-element tensor of the
  `scalars` plugin (tf.summary, Keras), a series per tag. Read with the `tensorboard` package, an
  optional extra (`pip install 'eq-tui[tensorboard]'`).

`epoch` and `step` are positions, not metrics (as in the stacks' log lines, results/stacks.py):
each entry or row gives one value of each other number it holds, runtime and throughput figures
(`train_runtime`, `eval_samples_per_second`, `total_flos`) included.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Iterator
from typing import Any

from eq_tui.results.parse import Metrics, add_values, json_or_none, number, parse_csv

POSITIONS = frozenset({"epoch", "step"})
# Lightning's TensorBoardLogger writes `hp_metric` -1 at the start as a placeholder
TB_NOT_METRICS = POSITIONS | {"hp_metric"}
TB_INSTALL = "pip install 'eq-tui[tensorboard]'"
TB_SKIPPED = f"TensorBoard event files were not read: the reader is an extra ({TB_INSTALL})"

# a trainer_state.json cut to its last MiB: its log entries are flat objects that hold `step`
_FLAT_OBJECT = re.compile(r"\{[^{}]*\}")
_RECORD_HEADER = 12  # uint64 length, uint32 masked crc32c of the length
_RECORD_FOOTER = 4  # uint32 masked crc32c of the data
MAX_RECORD = 64 << 20


def _log_entries(text: str) -> list[Any]:
    data = json_or_none(text)
    if isinstance(data, dict):
        history = data.get("log_history")
        return history if isinstance(history, list) else []
    # not one document: a file bigger than the read (its first line and its tail) or one being
    # written; its entries are still whole objects, in order
    entries = []
    for match in _FLAT_OBJECT.finditer(text):
        entry = json_or_none(match.group(0))
        if isinstance(entry, dict) and number(entry.get("step")) is not None:
            entries.append(entry)
    return entries


def parse_trainer_state(text: str) -> Metrics:
    """HF Trainer's `trainer_state.json`: the series of each key of `log_history`, one value per
    entry that logged it (`loss` per logging step, `eval_accuracy` per evaluation,
    `train_runtime` once); `epoch` and `step` are left out."""
    metrics: Metrics = {}
    for entry in _log_entries(text):
        if isinstance(entry, dict):
            add_values(metrics, {str(key): value for key, raw in entry.items()
                           if key not in POSITIONS and (value := number(raw)) is not None})
    return metrics


def parse_lightning_csv(text: str) -> Metrics:
    """Lightning's CSVLogger `metrics.csv`: the series of each column but `epoch` and `step`."""
    return {key: series for key, series in parse_csv(text).items() if key not in POSITIONS}


# ---- TensorBoard ---------------------------------------------------------------------------


def tensorboard_available() -> bool:
    try:
        from tensorboard.compat.proto import event_pb2  # noqa: F401
    except ImportError:
        return False
    return True


def decode_transport(encoding: str, body: str) -> bytes:
    """The bytes of a binary file as the host sent them: `b64` (base64) or `hex` (od -tx1)."""
    try:
        if encoding == "b64":
            return base64.b64decode("".join(body.split()))
        if encoding == "hex":
            return bytes.fromhex("".join(body.split()))
    except (ValueError, binascii.Error):
        pass
    return b""


def records(data: bytes, *, cut: bool = False) -> Iterator[bytes]:
    """The records of a TFRecord stream. `cut`: the stream is a file's tail, so the first whole
    record is found by its header's checksum."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    def header_at(offset: int) -> int | None:
        if offset + _RECORD_HEADER > len(data):
            return None
        length_bytes = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (crc,) = struct.unpack("<I", data[offset + 8:offset + 12])
        if length > MAX_RECORD or masked_crc32c(length_bytes) != crc:
            return None
        return length

    offset = 0
    if cut:
        while offset + _RECORD_HEADER <= len(data) and header_at(offset) is None:
            offset += 1
    while True:
        length = header_at(offset)
        if length is None:
            return
        end = offset + _RECORD_HEADER + length
        if end + _RECORD_FOOTER > len(data):
            return  # a record still being written
        yield data[offset + _RECORD_HEADER:end]
        offset = end + _RECORD_FOOTER


def _scalar(value: Any, plugin: str) -> float | None:
    if value.HasField("simple_value"):
        return float(value.simple_value)
    # a tag whose metadata was cut off with a file's head (unknown, "") is taken for a scalar:
    # the other plugins' values are strings or many numbers
    if not value.HasField("tensor") or plugin not in ("scalars", ""):
        return None
    from tensorboard.util import tensor_util

    try:
        array = tensor_util.make_ndarray(value.tensor)
    except (ValueError, TypeError, KeyError):
        return None
    if array.size != 1 or array.dtype.kind not in "fiub":
        return None
    return float(array.reshape(-1)[0])


def parse_events(data: bytes, *, cut: bool = False) -> Metrics:
    """A TensorBoard event file's scalars, a series per tag in the order written. Needs the
    `tensorboard` extra (ImportError without it)."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import event_pb2

    metrics: Metrics = {}
    plugins: dict[str, str] = {}  # tf.summary writes a tag's metadata with its first value only
    for record in records(data, cut=cut):
        try:
            event = event_pb2.Event.FromString(record)
        except DecodeError:
            continue
        if not event.HasField("summary"):
            continue
        values: dict[str, float] = {}
        for value in event.summary.value:
            if value.HasField("metadata") and value.metadata.plugin_data.plugin_name:
                plugins[value.tag] = value.metadata.plugin_data.plugin_name
            if value.tag in TB_NOT_METRICS:
                continue
            found = _scalar(value, plugins.get(value.tag, ""))
            if found is not None:
                values[value.tag] = found
        add_values(metrics, values)
    return metrics
