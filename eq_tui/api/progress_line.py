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
    # Keras: ` 450/1000 [=====>....] - ETA: 12s`
    r"|(?<![\w./])(?P<kn>\d+)/(?P<ktotal>\d+) \[[=>.]*\]")
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
