"""How far a job says it is, from one log line: the one parser of progress, for hang detection,
the UI's progress column and ETAs. Pure.

What it reads, the most specific first:

- a progress bar: tqdm's `45%|████▌     | 450/1000 [00:10<00:12, 43.2it/s]` (its counts when
  they are plain numbers, else its percentage) or Keras's `450/1000 [=====>....]`;
- a labelled counter: `epoch 3/10`, `Epoch [3/10]`, `Epoch: 3/10`, `step 1200/5000`,
  `iter 7 of 20`, `batch 5/50`;
- a labelled percentage: `42% done`, `progress: 42%`.

An epoch counter beside a bar or a step counter (`Epoch 3/10: 45%|…`, `Epoch [3/10], Step
[120/500]`) is the outer loop: the bar counts within epoch 3, so the job is (2 + 0.45) / 10 of
the way. A bare `a/b` or `n%` is not progress: dates (`2026/11/23`), paths (`run_3/10.ckpt`),
`lr=1/3` and `GPU 45%` are what such numbers usually are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_COUNT = r"\d+(?:\.\d+)?[kMGT]?"
_BAR = re.compile(
    # tqdm: `{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [...]`
    r"(?<![\w.])(?P<pct>\d{1,3}(?:\.\d+)?)%\|[^|]*\|"
    rf"(?:\s*(?P<n>{_COUNT})/(?P<total>{_COUNT})(?![\w/.]))?"
    # Keras 2: ` 450/1000 [=====>....] - ETA: 12s`; Keras 3: ` 450/1000 ━━━━━━━━━━ 3s 7ms/step`
    r"|(?<![\w./])(?P<kn>\d+)/(?P<ktotal>\d+) (?:\[[=>.]*\]|━+)")
_COUNTER = re.compile(
    r"(?<![\w/.=-])(?P<label>epoch|step|iter(?:ation)?|batch)s?\b\s*[:=#]?\s*[\[(]?\s*"
    r"(?P<done>\d+)\s*(?:/|\bof\b)\s*(?P<total>\d+)\s*[\])]?(?![\w/]|\.\w)", re.IGNORECASE)
_PERCENT = re.compile(
    r"(?<![\w.])(?P<a>\d{1,3}(?:\.\d+)?)\s*%\s*(?:done|complete)"
    r"|\b(?:progress|done|complete(?:d)?)\s*[:=]?\s*(?P<b>\d{1,3}(?:\.\d+)?)\s*%", re.IGNORECASE)
_SCALE = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
# signs of training beyond a progress fraction: `Epoch 3`, `step: 1200`, `loss=0.41`,
# `val_acc: 0.9`, `loss nan` (a bare `lr=0.1` is how a script echoes its arguments, not progress)
_TRAINING = re.compile(
    r"\b(?:epoch|step|iter(?:ation)?)\s*[:=#\[(]?\s*\d+"
    r"|\b(?:\w*loss|\w*acc(?:uracy)?|val_\w+|train_\w+|eval_\w+|test_\w+|perplexity|ppl|"
    r"reward|f1|auc|bleu|mse|mae|rmse)\b\s*[:=]?\s*[-+]?(?:\d|nan\b|inf\b)", re.IGNORECASE)


@dataclass(frozen=True)
class Reading:
    """What one line says of a job's progress: how far (0 to 1) and, where it counts something,
    in what (`unit`: epoch, step, iter, batch, or `it` for a bar's items) and how many of them
    the whole run has (`total`); a percentage alone counts nothing (`unit` and `total` None).
    Jobs of different lengths are compared by units per second, never by fraction."""

    fraction: float
    unit: str | None = None
    total: float | None = None

    @property
    def done(self) -> float | None:
        """How many units it has done (None for a percentage alone)."""
        return self.fraction * self.total if self.total is not None else None


def progress_fraction(line: str) -> float | None:
    """How far a log line says the job is, from 0 to 1; None when it says nothing of it."""
    reading = progress_reading(line)
    return reading.fraction if reading is not None else None


def progress_reading(line: str) -> Reading | None:
    """How far a log line says the job is, and in what units; None when it says nothing of it."""
    if "/" not in line and "%" not in line and "of" not in line:
        return None  # most log lines: no regex run at all
    bar = _last_bar(line)
    epoch, finer = _counters(line)
    inner = bar if bar is not None else finer
    if epoch is not None and inner is not None:
        done, total = epoch
        fraction = (min(1.0, (max(done - 1, 0) + inner[0]) / total) if done
                    else inner[0] / total)
        return Reading(fraction, "epoch", float(total))
    if inner is not None:
        return Reading(*inner)
    if epoch is not None:
        return Reading(epoch[0] / epoch[1], "epoch", float(epoch[1]))
    percent = _labelled_percent(line)
    return Reading(percent) if percent is not None else None


def shows_training(line: str) -> bool:
    """Whether a log line says the job has trained some: progress, an epoch or step number, or
    a training metric's value (the crash guard tells a broken command from a bad result by it)."""
    return progress_fraction(line) is not None or _TRAINING.search(line[:4096]) is not None


def _last_bar(line: str) -> tuple[float, str | None, float | None] | None:
    """The last bar's fraction, with `it` and its total when it counts items."""
    found = None
    for match in _BAR.finditer(line):
        if match.group("pct") is not None:
            counted = _counted(match.group("n"), match.group("total"))
            if counted is None:
                percent = float(match.group("pct"))
                counted = (percent / 100, None, None) if percent <= 100 else None
        else:
            counted = _counted(match.group("kn"), match.group("ktotal"))
        if counted is not None:
            found = counted
    return found


def _counters(line: str) -> tuple[tuple[int, int] | None,
                                   tuple[float, str | None, float | None] | None]:
    """The last epoch counter (done, total) and the last finer one (step, iter, batch) as a
    fraction with its unit and total; a counter past its total is no progress."""
    epoch: tuple[int, int] | None = None
    finer: tuple[float, str | None, float | None] | None = None
    for match in _COUNTER.finditer(line):
        done, total = int(match.group("done")), int(match.group("total"))
        if total <= 0 or done > total:
            continue
        label = match.group("label").lower()
        if label == "epoch":
            epoch = (done, total)
        else:
            finer = (done / total, "iter" if label.startswith("iter") else label, float(total))
    return epoch, finer


def _labelled_percent(line: str) -> float | None:
    found = None
    for match in _PERCENT.finditer(line):
        percent = float(match.group("a") or match.group("b"))
        if percent <= 100:
            found = percent / 100
    return found


def _counted(done: str | None, total: str | None) -> tuple[float, str | None, float | None] | None:
    if done is None or total is None:
        return None
    n, of = _number(done), _number(total)
    return (n / of, "it", of) if of > 0 and n <= of else None


def _number(text: str) -> float:
    scale = _SCALE.get(text[-1], 1.0)
    return float(text[:-1] if scale != 1.0 else text) * scale


# ---- what a line says toward the whole job's progress (job_progress.py keeps the state) ------

_KERAS_BAR = re.compile(r"(?<![\w./])(?P<n>\d+)/(?P<total>\d+) (?:\[[=>.]*\]|━+)")
# tqdm's meter, `{desc}: {pct}%|{bar}| {n}/{total} [...]`, or with no bar (ncols=0):
# `{desc}: {pct}% {n}/{total} [...]`
_TQDM = re.compile(
    r"(?<![\w.])(?P<pct>\d{1,3}(?:\.\d+)?)%(?:\|[^|]*\||(?= \d))"
    rf"(?:\s*(?P<n>{_COUNT})/(?P<total>{_COUNT})(?![\w/.]))?")
# an epoch with no total: Lightning's and most scripts' tqdm desc `Epoch 3` (0-based), fairseq's
# `epoch 003` (1-based, always three digits or more) and its `begin training epoch 3`
_EPOCH_ALONE = re.compile(r"(?<![\w/.=-])(?P<label>[Ee]poch)\s*[:#]?\s*(?P<n>\d+)(?![\d/.]|\s*/)")
_FAIRSEQ_BEGIN = re.compile(r"\bbegin training epoch (?P<n>\d+)\b")
_FAIRSEQ_EPOCH = re.compile(r"(?<![\w/.=-])epoch (?P<n>\d{3,})(?P<after>:| \||(?=  \d))")
_FAIRSEQ_END = re.compile(r"\bend of epoch (?P<n>\d+)\b")
# fairseq's simple bar inside an epoch: `epoch 003:    100 / 380 loss=...`
_SPACED_COUNT = re.compile(r"(?<![\w./])(?P<n>\d+) / (?P<total>\d+)(?![\w/.])")
_TIMM_TRAIN = re.compile(r"\bTrain: (?P<epoch>\d+) \[\s*(?P<n>\d+)/(?P<total>\d+)\b")
# torchtune's tqdm desc `{epoch + 1}|{global_step}|Loss: {loss}` (recipes/*.py)
_TORCHTUNE = re.compile(r"(?<![\w|])(?P<epoch>\d+)\|(?P<step>\d+)\|Loss: ")
# a global step with no total: nanoGPT's `iter 510:` / `step 500:`, torchtune's `Step 10 |`,
# Lightning's `global step 12:`, fairseq's `num_updates=860`
_GLOBAL_STEP = re.compile(
    r"(?<![\w/.=-])(?:(?:global )?step|[Ss]tep|iter|num_updates)(?:\s+|=|\s*:\s*)(?P<n>\d+)"
    r"(?![\d/.]|\s*(?:/|of\b))")
_HF_EPOCH = re.compile(r"'epoch': (?P<x>\d+(?:\.\d+)?)[,}]")
_EVALUATION = re.compile(r"\b(?:valid(?:ation|ating)?|eval(?:uat\w+)?|test(?:ing)?|predict\w*)\b"
                         r"|\bTest: \[|\bvalid on\b", re.IGNORECASE)
_METRIC = re.compile(r"\b(?:\w*loss|\w*acc(?:uracy)?|val_\w+|ppl|perplexity)\b\s*[:=]?\s*"
                     r"[-+]?(?:\d|nan\b|inf\b)", re.IGNORECASE)


@dataclass(frozen=True)
class LineProgress:
    """What one line says toward the whole job's progress, each part as the stack means it
    (a tracker, `job_progress.py`, combines them across lines):

    - `epoch`: the epoch it is in, counted from 1 (Lightning's and timm's 0-based epochs are
      shifted), and `epochs` when the line states the run's total (`Epoch 5/8`);
    - `ended`: the line closes that epoch (a summary with its metrics, fairseq's validation);
    - `inner`: (done, total) of a counter within the epoch (or of the run, when no epoch is
      known and it is not `per_epoch`: HF's training bar over max_steps), in `unit`;
    - `per_epoch`: that counter restarts every epoch (Keras's bar, `batch k/n`);
    - `epochs_done`: HF's `'epoch': 1.5`; `step`: a global step with no total on the line;
    - `percent`: a labelled percentage of the whole run (`42% done`);
    - `evaluation`: an evaluation's bar or line, never progress of the training."""

    epoch: int | None = None
    epochs: int | None = None
    ended: bool = False
    inner: tuple[float, float] | None = None
    unit: str = "it"
    per_epoch: bool = False
    epochs_done: float | None = None
    step: int | None = None
    percent: float | None = None
    evaluation: bool = False


def read_progress(line: str) -> LineProgress | None:
    """What a line says toward its job's progress; None when it says nothing of it."""
    line = line[:4096]
    if not any(c.isdigit() for c in line):
        return None
    hf = _HF_EPOCH.search(line) if line.lstrip().startswith("{") else None
    if hf is not None:
        return LineProgress(epochs_done=float(hf.group("x")))
    for read in (_timm(line), _torchtune(line), _fairseq(line)):
        if read is not None:
            return read
    tqdm = _tqdm(line)
    if tqdm is not None:
        return tqdm
    keras = _last(_KERAS_BAR, line)
    epoch, finer = _counters(line)
    if keras is not None:
        inner = (float(keras.group("n")), float(keras.group("total")))
        if inner[0] <= inner[1] and inner[1] > 0:
            return _with_epoch(LineProgress(inner=inner, unit="step", per_epoch=True), epoch)
    if finer is not None and finer[2] is not None:
        unit = finer[1] or "step"
        inner = (finer[0] * finer[2], finer[2])
        return _with_epoch(LineProgress(inner=inner, unit=unit, per_epoch=unit == "batch"),
                           epoch)
    if epoch is not None:
        # `Epoch 5/8` alone is Keras's (and most scripts') start of epoch 5; with the epoch's
        # metrics beside it, its end
        done, total = epoch
        return LineProgress(epoch=max(done, 1), epochs=total,
                            ended=done > 0 and _METRIC.search(line) is not None)
    alone = _epoch_alone(line)
    if alone is not None:
        return LineProgress(epoch=alone, ended=_METRIC.search(line) is not None)
    step = _last(_GLOBAL_STEP, line)
    if step is not None:
        return LineProgress(step=int(step.group("n")), unit="step")
    percent = _labelled_percent(line)
    if percent is not None:
        return LineProgress(percent=percent)
    if _EVALUATION.search(line) and ("/" in line or "%" in line):
        return LineProgress(evaluation=True)
    return None


def _with_epoch(read: LineProgress, epoch: tuple[int, int] | None) -> LineProgress:
    if epoch is None:
        return read
    done, total = epoch
    return LineProgress(epoch=max(done, 1), epochs=total, inner=read.inner, unit=read.unit,
                        per_epoch=True)


def _last(pattern: re.Pattern[str], line: str) -> re.Match[str] | None:
    found = None
    for match in pattern.finditer(line):
        found = match
    return found


def _epoch_alone(line: str, *, bar: bool = False) -> int | None:
    """An epoch with no total, counted from 1: fairseq's `epoch 003` is 1-based; a bar's
    `Epoch 3` desc (Lightning, most scripts: `for epoch in range(n)`) is 0-based."""
    match = _EPOCH_ALONE.search(line)
    if match is None:
        return None
    text = match.group("n")
    if (len(text) >= 3 and text.startswith("0")) or not bar:
        return int(text) if int(text) > 0 else 1
    return int(text) + 1


def _tqdm(line: str) -> LineProgress | None:
    """A tqdm bar: with an epoch in its desc (`Epoch 3: 45%|...`), the epoch's bar; an
    evaluation's (`Validation: ...`) nothing; else a bar of the whole run (HF's over
    max_steps), the tracker telling an evaluation bar by its total."""
    match = _last(_TQDM, line)
    if match is None:
        return None
    desc = line[:match.start()]
    if _EVALUATION.search(desc):
        return LineProgress(evaluation=True)
    counted = _counted(match.group("n"), match.group("total"))
    if counted is not None and counted[2] is not None:
        inner: tuple[float, float] | None = (counted[0] * counted[2], counted[2])
    else:
        percent = float(match.group("pct"))
        inner = (percent, 100.0) if percent <= 100 else None
    if inner is None:
        return None
    epoch, _finer = _counters(desc)
    if epoch is not None:  # `Epoch 3/10: 45%|...`
        return _with_epoch(LineProgress(inner=inner, unit="step"), epoch)
    alone = _epoch_alone(desc, bar=True)
    if alone is not None:
        return LineProgress(epoch=alone, inner=inner, unit="step", per_epoch=True)
    return LineProgress(inner=inner, unit="step" if counted is not None else "percent")


def _timm(line: str) -> LineProgress | None:
    """timm's train.py: `Train: 3 [  50/100 ( 50%)]`, epoch 3 counted from 0."""
    match = _TIMM_TRAIN.search(line)
    if match is None:
        return None
    n, total = int(match.group("n")), int(match.group("total"))
    if total <= 0 or n > total:
        return None
    return LineProgress(epoch=int(match.group("epoch")) + 1, inner=(float(n), float(total)),
                        unit="step", per_epoch=True)


def _torchtune(line: str) -> LineProgress | None:
    """torchtune's bar `1|10|Loss: 0.57:  10%|█ | 10/100`: epoch 1 (from 1), global step 10,
    the bar counting the epoch's steps."""
    match = _TORCHTUNE.search(line)
    if match is None:
        return None
    bar = _last(_TQDM, line[match.end():])
    counted = _counted(bar.group("n"), bar.group("total")) if bar is not None else None
    inner = (counted[0] * counted[2], counted[2]) \
        if counted is not None and counted[2] is not None else None
    return LineProgress(epoch=max(1, int(match.group("epoch"))), inner=inner, unit="step",
                        per_epoch=True, step=int(match.group("step")))


def _fairseq(line: str) -> LineProgress | None:
    """fairseq-train: `epoch 003:  45%|` or `epoch 003:    100 / 380 loss=...` inside epoch 3
    (from 1), `epoch 003 | loss ...` its summary, `epoch 003 | valid on 'valid' subset` its
    validation (its training done), `begin training epoch 3`, `end of epoch 3`."""
    begin = _FAIRSEQ_BEGIN.search(line)
    if begin is not None:
        return LineProgress(epoch=max(1, int(begin.group("n"))))
    end = _FAIRSEQ_END.search(line)
    if end is not None:
        return LineProgress(epoch=max(1, int(end.group("n"))), ended=True)
    match = _FAIRSEQ_EPOCH.search(line)
    if match is None:
        return None
    epoch = int(match.group("n"))
    if epoch <= 0:
        return None
    rest = line[match.end():]
    if "valid on" in rest or match.group("after") == " |":
        return LineProgress(epoch=epoch, ended=True)
    counted = _last(_SPACED_COUNT, rest)
    if counted is not None:
        n, total = float(counted.group("n")), float(counted.group("total"))
        if total > 0 and n <= total:
            return LineProgress(epoch=epoch, inner=(n, total), unit="step", per_epoch=True)
    bar = _last(_TQDM, rest)
    if bar is not None:
        counts = _counted(bar.group("n"), bar.group("total"))
        if counts is not None and counts[2] is not None:
            return LineProgress(epoch=epoch, inner=(counts[0] * counts[2], counts[2]),
                                unit="step", per_epoch=True)
        percent = float(bar.group("pct"))
        if percent <= 100:
            return LineProgress(epoch=epoch, inner=(percent, 100.0), unit="step", per_epoch=True)
    return LineProgress(epoch=epoch)
