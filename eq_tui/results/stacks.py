"""What one log line of a training stack says: its metrics, the step or epoch it states them
at, and whether it is a progress bar's redraw. Pure; malformed input never raises.

Each reader is written from the stack's own source (the file that prints the line is named
beside it); a line no reader claims is read as plain `key=value`, `key: value` or
`key:value` pairs. The readers, the most specific first:

- hf: HuggingFace Trainer's log dicts, `{'eval_loss': 0.4533, 'eval_accuracy': 0.645, ...,
  'epoch': 0.75}` (transformers/trainer_callback.py, ProgressCallback.on_log writes
  `str(logs)`), read as a literal dict of numbers — never `eval` — with `nan`, `inf` and numpy
  2's `np.float64(0.5)` spellings; its closing `***** eval metrics *****` block is plain
  `key = value` (transformers/trainer_pt_utils.py, log_metrics).
- lightning: the tqdm bar's postfix, `Epoch 3:  40%|████ | 20/50 [00:01<00:02, v_num=0,
  val_loss=0.459]` (lightning/pytorch/callbacks/progress/tqdm_progress.py: `Tqdm.format_num`
  pads floats to five characters, so nan prints `nan.0`); `v_num` is the logger's version.
- keras: Keras 2's Progbar, `58/469 [==>....] - ETA: 3s - loss: 0.4123 - accuracy: 0.8812`
  (keras/utils/generic_utils.py, Progbar.update), and Keras 3's `58/469 ━━━━━━━━━━ 3s 7ms/step
  - accuracy: 0.88 - loss: 0.41` (keras/src/utils/progbar.py).
- torchtune: `Step 10 | loss:0.5733 lr:2e-05 tokens_per_second_per_gpu:1234.5`
  (torchtune/training/metric_logging.py, StdoutLogger.log_dict) and its bar's description
  `1|10|Loss: 0.5733` (recipes/full_finetune_single_device.py).
- timm: `Train: 3 [  50/100 ( 50%)]  Loss: 0.976 (1.02)  ...  LR: 1.000e-03` and
  `Test: [  50/50]  Time: ...  Loss:  0.8730 (0.9123)  Acc@1: 76.0000 ( 75.1234)`
  (pytorch-image-models/train.py, train_one_epoch and validate): a Test line's figures are
  its running averages (the bracketed ones), an evaluation only at its last batch.
- nanogpt: `step 500: train loss 1.2345, val loss 1.4567` and `iter 510: loss 1.2001, time
  30.12ms, mfu 12.30%` (nanoGPT/train.py).
- fairseq: `epoch 003 | valid on 'valid' subset | loss 9.2 | ppl 588.1 | num_updates 1200`
  and the train summary `epoch 003 | loss 9.5 | ...`, with or without the logging prefix and
  the leading `| ` of older versions (fairseq/logging/progress_bar.py, SimpleProgressBar and
  JsonProgressBar's `_format_stats`; fairseq_cli/train.py names the subset).
- tqdm: any bar's postfix, `45%|████▌ | 450/1000 [00:10<00:12, 43.2it/s, loss=0.41]`
  (tqdm/std.py, format_meter).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

MAX_LINE = 16384  # a longer line is read up to here: a metrics line is never this long
MAX_LINE_KEYS = 256  # a dict line with thousands of keys is not a metrics line

# a number as the stacks print it: signs, exponents, a thousands separator that never splits
# it (`66,955,010`), and nan/inf in Python's, numpy's and Lightning's (`nan.0`) spellings
NUMBER = (r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
          r"|[-+]?(?:nan|inf(?:inity)?)(?:\.0+)?")
_NUMBER_ONLY = re.compile(rf"(?:{NUMBER})\Z", re.IGNORECASE)
# `key=value`, `key = value`, `key: value` and `key:value`; the key starts with a letter and is
# not the tail of a path, a URL or another word (`host:8080/x` is not a metric). `key:value`
# with no space needs the value to end at a blank, a comma or the line's end (`12:30:45` and
# `cuda:0,1` are not metrics)
_KEY = r"[A-Za-z_][\w./@-]*?"
_PAIR = re.compile(
    rf"(?<![\w./:=@-])({_KEY})\s*(?:=|:\s)\s*({NUMBER})(?![\w.:/%@-]|,\d)"
    rf"|(?<![\w./:=@-])({_KEY}):({NUMBER})(?=[\s,;|\]]|\Z)",
    re.IGNORECASE)
# numbers a training log prints that are not results
IGNORED_KEYS = frozenset({"pid", "ppid", "attempt", "rank", "local_rank", "world_size",
                          "port", "gpu", "seed", "job", "host", "node", "cuda", "device",
                          "v_num"})

# a dict line's start (its end may be past MAX_LINE); JSON lines read the same way
_HF_DICT = re.compile(r"\{\s*['\"][^'\"]{1,200}['\"]\s*:")
_HF_ITEM = re.compile(
    r"['\"]([^'\"]{1,200})['\"]\s*:\s*"
    r"(?:(?:np\.)?(?:float|int)(?:16|32|64)?\(\s*|tensor\(\s*)?"
    rf"({NUMBER})\s*\)?\s*(?=[,}}])", re.IGNORECASE)
_HF_POSITIONS = ("step", "epoch")
_KERAS2_BAR = re.compile(r"(?<![\w/.])\d+/\d+ \[[=>.]*\]")
_KERAS3_BAR = re.compile(r"(?<![\w/.])\d+/\d+ [━─]+")
# verbose=2 (a line per epoch, no bar): `469/469 - 2s - loss: 0.3000 - val_loss: 0.2000`
_KERAS_EPOCH_LINE = re.compile(r"^\s*\d+/\d+ - \d+m?s\b")
_KERAS_PAIR = re.compile(rf"\s-\s({_KEY}):\s+({NUMBER})(?=\s|\Z)", re.IGNORECASE)
# a tqdm bar: `45%|████▌ | 450/1000 [`, or without its bar where the stream is no terminal
# (`50% 1/2 [00:00<00:00, ...`)
_TQDM_BAR = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d+)?%(?:\|[^|]*\||\s+\d+/\d+\s+\[)")
# its postfix: after the rate, up to the `]` (or the line's end: tqdm cuts a bar at the
# terminal's width)
_TQDM_POSTFIX = re.compile(r"\[[^\[\],]*?(?:,\s*[^\[\],=]*?(?:it/s|s/it))?,\s*([^\[\]]*)(?:\]|\Z)")
# Lightning's RichProgressBar: `Epoch 3/9  ━━━━━━━╸━━━ 20/50 0:00:01 • 0:00:02 14.2it/s v_num: 0
# val_loss: 0.459` (lightning/pytorch/callbacks/progress/rich_progress.py, MetricsTextColumn)
_LIGHTNING_RICH = re.compile(r"^\s*(?:Epoch \d+/\d+|Validation|Testing|Predicting)\s+"
                             r"[━─╸╺\s]*[━─╸╺]+[━─╸╺\s]*\d+/\d+")
_LIGHTNING = re.compile(r"^\s*(?:Epoch \d+|Validation(?: DataLoader \d+)?|Sanity Checking"
                        r"(?: DataLoader \d+)?|Testing(?: DataLoader \d+)?|Predicting"
                        r"(?: DataLoader \d+)?)\s*:\s+\d{1,3}%")
_TORCHTUNE_STEP = re.compile(r"(?:^|(?<=[\s\]]))Step (\d+) \|\s")
_TORCHTUNE_DESC = re.compile(rf"(?<![\w.])(\d+)\|(\d+)\|Loss: ({NUMBER})", re.IGNORECASE)
_TIMM = re.compile(r"(?:^|\s)(Train|Test|Test \(EMA\)): (?:(\d+) )?\[\s*(\d+)/(\d+)")
_TIMM_FIGURE = re.compile(rf"\b(Loss|Acc@1|Acc@5|LR):\s+({NUMBER})(?:\s*\(\s*({NUMBER})\))?",
                          re.IGNORECASE)
_NANOGPT_EVAL = re.compile(
    rf"(?:^|\s)step (\d+): train loss ({NUMBER}), val loss ({NUMBER})", re.IGNORECASE)
_NANOGPT_ITER = re.compile(rf"(?:^|\s)iter (\d+): loss ({NUMBER})", re.IGNORECASE)
_NANOGPT_MORE = re.compile(rf",\s*(time|mfu) ({NUMBER})(?:ms|%)", re.IGNORECASE)
_FAIRSEQ = re.compile(r"(?:^|\|\s*)epoch (\d{3})\b:?(.*)\Z")
_FAIRSEQ_SUBSET = re.compile(r"\|\s*(\w+) on '([^']+)' subset\b")
_FAIRSEQ_PAIR = re.compile(rf"\|\s*([A-Za-z_][\w/]*(?: [A-Za-z_][\w/]*)?)\s+({NUMBER})\s*(?=\||\Z)",
                           re.IGNORECASE)
_FAIRSEQ_PROGRESS = re.compile(r"[^|]*?\s(\d+) / (\d+)\s+(.*)\Z")
# a position the line states for its figures: `epoch 3/10`, `step 1200`, `iter 7`
_POSITION = re.compile(r"(?<![\w/.=-])(epoch|step|iter(?:ation)?)s?\s*[:=#\[(]?\s*(\d+)\b",
                       re.IGNORECASE)


@dataclass(frozen=True)
class LineRead:
    """What one line says. `position`: the step or epoch it states its figures at (a report
    counts once per position); None when it states none (a report counts once per change).
    `redraw`: a progress bar's redraw, which repeats figures it showed before. `event`: the
    line is one log event of its stack (an HF Trainer dict, a Keras bar's update, nanoGPT's
    `iter N:`), printed once per step or evaluation: each of its figures is a report.
    `partial`: figures on the way to an evaluation (timm's running averages before the last
    batch, fairseq's validation in progress), shown but never a report."""

    metrics: dict[str, float] = field(default_factory=dict)
    stack: str | None = None
    position: str | None = None
    redraw: bool = False
    partial: bool = False
    event: bool = False


EMPTY = LineRead()


def number_text(text: str) -> float | None:
    """A number as a stack prints it, or None."""
    text = text.strip()
    if not text or len(text) > 64 or _NUMBER_ONLY.match(text) is None:
        return None
    lowered = text.lower()
    if "nan" in lowered:
        return math.nan
    if "inf" in lowered:
        return -math.inf if lowered.startswith("-") else math.inf
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def pairs(text: str) -> dict[str, float]:
    """The `key=value`, `key: value` and `key:value` numbers of a text."""
    found: dict[str, float] = {}
    if "=" not in text and ":" not in text:
        return found
    for match in _PAIR.finditer(text):
        key = (match.group(1) or match.group(3)).rstrip("./-")
        value = number_text(match.group(2) or match.group(4))
        if key and value is not None and key.lower() not in IGNORED_KEYS \
                and len(found) < MAX_LINE_KEYS:
            found[key] = value
    return found


def read_line(line: str) -> LineRead:
    """What one line (no `\\r` or `\\n` in it) says, by the first reader that knows it."""
    line = line[:MAX_LINE]
    if not line.strip():
        return EMPTY
    for reader in _READERS:
        read = reader(line)
        if read is not None:
            return read
    return _plain(line)


def _hf_dict(line: str) -> LineRead | None:
    if "{" not in line or _HF_DICT.search(line) is None:
        return None
    found: dict[str, float] = {}
    position = []
    for match in _HF_ITEM.finditer(line[line.index("{"):]):
        key, value = match.group(1), number_text(match.group(2))
        if value is None:
            continue
        if key in _HF_POSITIONS:
            position.append(f"{key} {value:g}")
        elif len(found) < MAX_LINE_KEYS and key.lower() not in IGNORED_KEYS:
            found[key] = value
    if not found:
        return None
    return LineRead(found, "hf", " ".join(position) or None, event=True)


def _tqdm_postfix(line: str) -> dict[str, float]:
    match = _TQDM_POSTFIX.search(line)
    return pairs(match.group(1)) if match is not None else {}


def _lightning(line: str) -> LineRead | None:
    rich = _LIGHTNING_RICH.search(line)
    if rich is not None:
        return LineRead(pairs(line[rich.end():]), "lightning", redraw=True)
    if _LIGHTNING.search(line) is None:
        return None
    return LineRead(_tqdm_postfix(line), "lightning", redraw=True)


def _keras(line: str) -> LineRead | None:
    if _KERAS2_BAR.search(line) is not None or _KERAS_EPOCH_LINE.search(line) is not None:
        stack = "keras2"
    elif _KERAS3_BAR.search(line) is not None:
        stack = "keras3"
    else:
        return None
    found: dict[str, float] = {}
    for match in _KERAS_PAIR.finditer(line):
        value = number_text(match.group(2))
        if value is not None and match.group(1).lower() not in IGNORED_KEYS:
            found[match.group(1)] = value
    # Progbar draws once per update (a new step), never the same step twice
    return LineRead(found, stack, event=True)


def _torchtune(line: str) -> LineRead | None:
    step = _TORCHTUNE_STEP.search(line)
    if step is not None:  # after the bar it follows when the logger prints on the bar's line
        return LineRead(pairs(line[step.end():]), "torchtune", f"step {step.group(1)}",
                        event=True)
    desc = _TORCHTUNE_DESC.search(line)
    if desc is not None:
        value = number_text(desc.group(3))
        found = {"loss": value} if value is not None else {}
        return LineRead(found, "torchtune", redraw=True)
    return None


def _timm(line: str) -> LineRead | None:
    head = _TIMM.search(line)
    if head is None:
        return None
    kind, epoch, batch, batches = head.groups()
    found: dict[str, float] = {}
    testing = kind.startswith("Test")
    prefix = "eval_" if testing else "train_"
    for match in _TIMM_FIGURE.finditer(line, head.end()):
        name, now, average = match.groups()
        # a Test line's figure is the running average (the bracketed one); Train's is the
        # batch's own beside its average, and its average is what timm's summary keeps
        text = average if average is not None else now
        value = number_text(text)
        if value is None:
            continue
        lowered = name.lower()
        if lowered == "loss":
            found[prefix + "loss"] = value
        elif lowered == "lr":
            found["lr"] = value
        else:
            found[name] = value
    if testing:
        return LineRead(found, "timm", partial=batch != batches, event=True)
    return LineRead(found, "timm", f"epoch {epoch} batch {batch}", event=True)


def _nanogpt(line: str) -> LineRead | None:
    evaluation = _NANOGPT_EVAL.search(line)
    if evaluation is not None:
        found = {name: value for name, text in (("train_loss", evaluation.group(2)),
                                                ("val_loss", evaluation.group(3)))
                 if (value := number_text(text)) is not None}
        return LineRead(found, "nanogpt", f"step {evaluation.group(1)}", event=True)
    training = _NANOGPT_ITER.search(line)
    if training is not None:
        found = {}
        loss = number_text(training.group(2))
        if loss is not None:
            found["loss"] = loss
        for match in _NANOGPT_MORE.finditer(line, training.end()):
            value = number_text(match.group(2))
            if value is not None:
                found[match.group(1).lower()] = value
        return LineRead(found, "nanogpt", f"iter {training.group(1)}", event=True)
    return None


def _fairseq(line: str) -> LineRead | None:
    if "epoch " not in line:
        return None
    match = _FAIRSEQ.search(line)
    if match is None:
        return None
    epoch, rest = int(match.group(1)), match.group(2)
    subset = _FAIRSEQ_SUBSET.search(rest)
    name = subset.group(2) if subset is not None else "train"
    found: dict[str, float] = {}
    for pair in _FAIRSEQ_PAIR.finditer(rest):
        value = number_text(pair.group(2))
        if value is None or len(found) >= MAX_LINE_KEYS:
            continue
        key = "_".join(pair.group(1).split())  # the old form's `valid loss`, `train ppl`
        found[key if key.startswith(f"{name}_") else f"{name}_{key}"] = value
    if found:  # a subset's summary: once per validation (an epoch can validate twice)
        where = f"{subset.group(2)} " if subset is not None else ""
        return LineRead(found, "fairseq", f"{where}epoch {epoch}", event=True)
    progress = _FAIRSEQ_PROGRESS.match(rest)
    if progress is None:
        return None
    # in-epoch progress, `epoch 005  1000 / 8223 loss=2.17 (3.20), wps=959`: training's logged
    # figures, or a validation on its way (not an evaluation yet)
    figures = pairs(progress.group(3))
    if subset is not None:
        return LineRead({f"{name}_{k}": v for k, v in figures.items()}, "fairseq",
                        partial=True)
    return LineRead(figures, "fairseq", f"epoch {epoch} {progress.group(1)}/"
                    f"{progress.group(2)}", event=True)


def _tqdm(line: str) -> LineRead | None:
    if _TQDM_BAR.search(line) is None:
        return None
    return LineRead(_tqdm_postfix(line), "tqdm", redraw=True)


def _plain(line: str) -> LineRead:
    found = pairs(line)
    if not found:
        return EMPTY
    position = _POSITION.search(line)
    where = f"{position.group(1).lower()} {int(position.group(2))}" if position else None
    return LineRead(found, None, where)


_READERS = (_hf_dict, _lightning, _keras, _torchtune, _timm, _nanogpt, _fairseq, _tqdm)


@dataclass
class _Last:
    position: str | None
    value: float


def same_value(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


class Reports:
    """Which figures are evaluations: a value counts once per position its line states, or,
    where the line states none (a bar's redraw, a bare `loss=0.4`), once per change — so a bar
    that repeats the last validation on every redraw makes one report, not eighty."""

    def __init__(self) -> None:
        self._last: dict[str, _Last] = {}

    def seed(self, metric: str, value: float, position: str | None = None) -> None:
        """Go on from a report made before (a restarted engine's last one)."""
        self._last[metric] = _Last(position, value)

    def new(self, read: LineRead) -> dict[str, float]:
        """The figures of a line that are reports; the rest repeat what was reported."""
        if read.partial or not read.metrics:
            return {}
        if read.event:
            for name, value in read.metrics.items():
                self._last[name] = _Last(read.position, value)
            return dict(read.metrics)
        position = None if read.redraw else read.position
        out: dict[str, float] = {}
        for name, value in read.metrics.items():
            last = self._last.get(name)
            if last is not None and (last.position == position if position is not None
                                     else same_value(last.value, value)):
                continue
            self._last[name] = _Last(position, value)
            out[name] = value
        return out
