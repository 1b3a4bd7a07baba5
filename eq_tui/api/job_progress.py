"""How far a whole job is, from its log lines in order: epoch k of N with the step inside it,
HF's step of max_steps, nanoGPT's iter of max_iters — never a per-epoch or an evaluation bar
alone, and never backwards. Pure and stateful: the engine feeds it each probe's lines
(`engine/tick/progress.py`), `eq-tui explain-log` a log's lines one by one.

The totals a stack does not print come from the job's command (`cmd_totals`): Lightning's
`--max_epochs 8` (its `Epoch 3:` bar is 0-based and has no total), timm's `--epochs`, nanoGPT's
`--max_iters=5000`, HF's `--max_steps`/`--num_train_epochs`, fairseq's `--max-epoch`,
torchtune's `epochs=3`. Without the whole run's total a job has no fraction rather than a
wrong one.

A fraction is dated: `at` is when it was first seen (the probe that brought its line), so a
rate is fraction / (at - started), whatever the time since."""

from __future__ import annotations

import re
from typing import Any

from eq_tui.api.progress_line import LineProgress, read_progress

# `--max_epochs 8`, `--epochs=8`, `trainer.max_epochs=8`, `epochs=3` (torchtune, Hydra)
_CMD_TOTAL = re.compile(
    r"(?<![\w-])(?:--?)?(?:[\w+]+\.)*(?P<key>max[_-]epochs?|num[_-]train[_-]epochs|"
    r"(?:num|n|nb)[_-]epochs?|epochs|max[_-]iters?|max[_-]steps|max[_-]updates?|"
    r"total[_-]steps|num[_-](?:train[_-])?steps|train[_-]steps)"
    r"(?:=|\s+)['\"]?(?P<value>\d+(?:\.\d+)?)(?![\w.])")


class JobProgress:
    """The whole job's progress from its lines in order (`observe`): `fraction` (0 to 1, None
    while the run's total is unknown), `at` (when that fraction was first seen), `unit` and
    `total` (what it counts: epoch, step; None for a percentage alone), `done`, and `source`
    (where it came from, e.g. `epoch 5/8 + step 58/469`)."""

    def __init__(self) -> None:
        self.fraction: float | None = None
        self.at: float | None = None
        self.unit: str | None = None
        self.total: float | None = None
        self.source = ""
        self.epochs: int | None = None  # the run's epochs: a line's, else the command's
        self.epochs_from = ""  # "" (a line) or the command's option
        self.steps: int | None = None  # the run's steps (the command's)
        self.steps_from = ""
        self.epoch: int | None = None  # the epoch it is in, from 1
        self.ended = False  # that epoch's training is done (its summary, its validation)
        self.inner: tuple[float, float] | None = None  # the epoch's bar: done, total
        self.per_epoch = False  # its bars start over each epoch (an epoch counter was seen)
        self.main: tuple[float, float] | None = None  # the run's bar (the largest total seen)

    @property
    def done(self) -> float | None:
        """How many units it has done (None without a total)."""
        if self.fraction is None or self.total is None:
            return None
        return self.fraction * self.total

    def cmd_totals(self, cmd: str) -> None:
        """Learn the run's epochs and steps from its command, where a line does not say."""
        for match in _CMD_TOTAL.finditer(cmd[:8192]):
            value = int(float(match.group("value")))
            if value <= 0:  # Lightning's max_steps=-1: no limit
                continue
            option = f"--{match.group('key')}"
            if "epoch" in option:
                if not self.epochs or self.epochs_from:
                    self.epochs, self.epochs_from = value, option
            else:
                self.steps, self.steps_from = value, option

    def observe(self, line: str, at: float) -> None:
        """Take in the job's next line, seen (or written) at `at`."""
        read = read_progress(line)
        if read is None or read.evaluation:
            return
        if read.epochs:
            self.epochs, self.epochs_from = read.epochs, ""
        candidates: list[tuple[float, str | None, float | None, str]]
        if read.epoch is not None:
            self.per_epoch = True
            if read.epoch != self.epoch:
                self.epoch, self.ended, self.inner = read.epoch, False, None
            if read.inner is not None:
                self.inner = read.inner
            self.ended = self.ended or read.ended
            candidates = self._by_epoch()
        elif read.inner is not None and (read.per_epoch or self.per_epoch):
            self._epoch_bar(read.inner)
            candidates = self._by_epoch()
        elif read.inner is not None:
            candidates = self._run_bar(read)
        else:
            candidates = []
        if read.step is not None and self.steps:
            candidates.append((min(1.0, read.step / self.steps), "step", float(self.steps),
                               f"step {read.step}/{self.steps} ({self.steps_from})"))
        if read.epochs_done is not None and self.epochs:
            candidates.append((min(1.0, read.epochs_done / self.epochs), "epoch",
                               float(self.epochs), f"epoch {read.epochs_done:g}/{self.epochs}"
                               f"{self._from(self.epochs_from)}"))
        if read.percent is not None:
            candidates.append((read.percent, None, None, f"{read.percent:.0%} done"))
        if candidates:
            self._take(max(candidates, key=lambda c: c[0]), at)

    def _epoch_bar(self, inner: tuple[float, float]) -> None:
        """A bar with no epoch on its line, in a job whose bars start over each epoch (Keras's
        bar under its `Epoch 5/8` line): a bar that starts over is the next epoch's."""
        self.per_epoch = True
        old = self.inner
        if old is not None and self.epoch is not None and old[1] == inner[1] \
                and inner[0] < old[0]:
            self.epoch += 1
            self.ended = False
        self.inner = inner

    def _run_bar(self, read: LineProgress) -> list[tuple[float, str | None, float | None, str]]:
        """A bar that is the run's (HF's over max_steps) unless it is an evaluation's: the run's
        bar has the command's step total, else the largest total seen; one that starts over is
        an epoch's, and says nothing of the run without its epoch."""
        assert read.inner is not None
        done, total = read.inner
        if read.unit == "percent":
            return [(done / 100, None, None, f"bar {done:g}%")]
        if self.steps and total != self.steps:
            return []  # the run's bar counts its steps: this is an evaluation's
        main = self.main
        if main is not None:
            if total > main[1]:
                self._reset()  # the bar read before was an evaluation's: start again
            elif total < main[1]:
                return []
            elif done < main[0]:
                self.per_epoch = True  # it starts over: an epoch's bar, and no epoch is known
                self.main = None
                self._reset()
                return []
        self.main = (done, total)
        return [(done / total, "step", total, f"step {done:g}/{total:g}"
                 + (f" ({self.steps_from})" if self.steps else " (bar)"))]

    def _by_epoch(self) -> list[tuple[float, str | None, float | None, str]]:
        epoch, epochs = self.epoch, self.epochs
        if epoch is None or not epochs:
            return []
        inner = self.inner
        within = 1.0 if self.ended else inner[0] / inner[1] if inner else 0.0
        source = f"epoch {epoch}/{epochs}{self._from(self.epochs_from)}"
        if self.ended:
            source += " done"
        elif inner is not None:
            source += f" + step {inner[0]:g}/{inner[1]:g}"
        return [(min(1.0, (epoch - 1 + within) / epochs), "epoch", float(epochs), source)]

    @staticmethod
    def _from(option: str) -> str:
        return f" (of {option})" if option else ""

    def _take(self, candidate: tuple[float, str | None, float | None, str], at: float) -> None:
        fraction, unit, total, source = candidate
        if self.fraction is not None and fraction <= self.fraction:
            return  # never backwards; the same fraction keeps the time it was first seen
        self.fraction, self.at, self.source = fraction, at, source
        if self.unit is None or unit == self.unit:
            self.unit, self.total = unit, total

    def _reset(self) -> None:
        self.fraction = self.at = self.unit = self.total = None
        self.source = ""

    # ---- persistence -----------------------------------------------------------------------

    _STATE = ("fraction", "at", "unit", "total", "source", "epochs", "epochs_from", "steps",
              "steps_from", "epoch", "ended", "inner", "per_epoch", "main")

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self._STATE}
        data["inner"] = list(self.inner) if self.inner is not None else None
        data["main"] = list(self.main) if self.main is not None else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> JobProgress:
        made = cls()
        if not isinstance(data, dict):
            return made
        try:
            made.fraction = _opt_float(data.get("fraction"))
            made.at = _opt_float(data.get("at"))
            made.unit = str(data["unit"]) if data.get("unit") else None
            made.total = _opt_float(data.get("total"))
            made.source = str(data.get("source") or "")
            made.epochs = int(data["epochs"]) if data.get("epochs") else None
            made.epochs_from = str(data.get("epochs_from") or "")
            made.steps = int(data["steps"]) if data.get("steps") else None
            made.steps_from = str(data.get("steps_from") or "")
            made.epoch = int(data["epoch"]) if data.get("epoch") else None
            made.ended = bool(data.get("ended"))
            made.inner = _pair(data.get("inner"))
            made.per_epoch = bool(data.get("per_epoch"))
            made.main = _pair(data.get("main"))
        except (TypeError, ValueError):
            return cls()
        return made


def _opt_float(value: Any) -> float | None:
    return float(value) if value is not None else None


def _pair(value: Any) -> tuple[float, float] | None:
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    return float(value[0]), float(value[1])
