"""fake-train's output in the style of real training stacks (--log-style), stdlib only.

Each style prints the same run (the epochs, losses and accuracies fake-train computes) as that
stack prints it, learnt from the stack's own source and the logs in tests/fixtures/stacks/:
its bar redrawn with \\r (or \\b\\r for Keras) a few times an epoch, its per-step lines and its
evaluation lines, the validation metric named as the stack names it. A style only formats; the
numbers and the pacing come from fake-train.
"""

from __future__ import annotations

import math
import sys

STYLES = ("plain", "hf", "lightning", "keras2", "keras3", "torchtune", "timm", "nanogpt",
          "fairseq", "tqdm")
STEPS = 100  # optimizer steps an epoch
VAL_BATCHES = 10


def val_loss(loss: float, acc: float) -> float:
    """The validation loss the stacks that print one show: above the training loss, worse as the
    accuracy falls (nan when the run diverged)."""
    return loss + 0.1 * (1.0 - acc)


def write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def tqdm_bar(frac: float, width: int = 10) -> str:
    """tqdm's unicode bar (tqdm/std.py, Bar): full blocks and one partial block."""
    cells = frac * width
    full = int(cells)
    part = "" if full >= width else " ▏▎▍▌▋▊▉"[int((cells - full) * 8)].strip()
    return ("█" * full + part).ljust(width)


def tqdm_num(value: float) -> str:
    """tqdm.format_num for a postfix float: three significant digits ('nan' for nan)."""
    return f"{value:.3g}"


def lightning_num(value: float) -> str:
    """Lightning's Tqdm.format_num: tqdm's number padded to five characters (nan -> 'nan.0')."""
    text = tqdm_num(value)
    if "e" in text:
        return text
    if "." not in text and len(text) < 5:
        text += "."
    return text + "0" * (5 - len(text))


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(max(0.0, seconds)), 60)
    return f"{minutes:02d}:{secs:02d}"


class Style:
    """The lines of one run. `redraw` is called a few times an epoch (k of STEPS steps done,
    with the training loss so far), `epoch_end` once the epoch's numbers are known."""

    name = "plain"

    def __init__(self, epochs: int, epoch_seconds: float, lr: float) -> None:
        self.epochs, self.epoch_seconds, self.lr = epochs, epoch_seconds, lr
        self.total = epochs * STEPS
        self.last_acc: float | None = None
        self.last_vloss: float | None = None

    def gstep(self, epoch: int, k: int) -> int:
        return (epoch - 1) * STEPS + k

    def epoch_start(self, epoch: int) -> None:
        pass

    def redraw(self, epoch: int, k: int, loss: float) -> None:
        pass

    def epoch_end(self, epoch: int, loss: float, acc: float) -> None:
        pass

    def finish(self) -> None:
        pass


class HuggingFace(Style):
    """transformers' Trainer: one tqdm bar over max_steps, the log dicts printed through
    tqdm.write (ProgressCallback.on_log: str(logs)) and an evaluation dict each epoch."""

    name = "hf"

    def bar(self, step: int) -> str:
        elapsed = step / STEPS * self.epoch_seconds
        remaining = elapsed * (self.total - step) / max(step, 1)
        return (f"\r{int(100 * step / self.total):3d}%|{tqdm_bar(step / self.total)}| "
                f"{step}/{self.total} [{clock(elapsed)}<{clock(remaining)}, "
                f"{STEPS / max(self.epoch_seconds, 1e-3):6.2f}it/s]")

    def redraw(self, epoch: int, k: int, loss: float) -> None:
        write(self.bar(self.gstep(epoch, k)))

    def epoch_end(self, epoch: int, loss: float, acc: float) -> None:
        step = self.gstep(epoch, STEPS)
        train = {"loss": round(loss, 4), "grad_norm": round(1.0 + loss, 4),
                 "learning_rate": self.lr * (1 - step / self.total), "epoch": float(epoch)}
        evaluation = {"eval_loss": round(val_loss(loss, acc), 4), "eval_accuracy": round(acc, 4),
                      "eval_runtime": 0.42, "eval_samples_per_second": 2380.95,
                      "eval_steps_per_second": 297.619, "epoch": float(epoch)}
        clear = "\r" + " " * len(self.bar(step).lstrip("\r")) + "\r"
        write(clear + str(train) + "\n" + self.bar(step))
        write(clear + str(evaluation) + "\n" + self.bar(step))

    def finish(self) -> None:
        write("\n")


class Lightning(Style):
    """PyTorch Lightning's TQDMProgressBar: 'Epoch N' bar (epochs from 0) whose postfix carries
    v_num and the last validation values on every redraw; a nested validation bar below it
    (ESC[A moves back up)."""

    name = "lightning"

    def postfix(self) -> str:
        text = "v_num=0"
        if self.last_acc is not None and self.last_vloss is not None:
            text += (f", val_loss={lightning_num(self.last_vloss)}"
                     f", val_acc={lightning_num(self.last_acc)}")
        return text

    def bar(self, epoch: int, k: int) -> str:
        frac = k / STEPS
        elapsed = frac * self.epoch_seconds
        rate = STEPS / max(self.epoch_seconds, 1e-3)
        return (f"\rEpoch {epoch - 1}: {int(100 * frac):3d}%|{tqdm_bar(frac)}| {k}/{STEPS} "
                f"[{clock(elapsed)}<{clock(self.epoch_seconds - elapsed)}, {rate:.2f}it/s, "
                f"{self.postfix()}]")

    def epoch_start(self, epoch: int) -> None:
        if epoch > 1:  # the finished epoch's bar stays; the next one starts on its own line
            write("\n")
        write(self.bar(epoch, 0))

    def redraw(self, epoch: int, k: int, loss: float) -> None:
        write(self.bar(epoch, k))

    def epoch_end(self, epoch: int, loss: float, acc: float) -> None:
        write(self.bar(epoch, STEPS))
        write("\n\rValidation: |          | 0/? [00:00<?, ?it/s]\x1b[A")
        write(f"\n\rValidation DataLoader 0: 100%|{tqdm_bar(1.0)}| {VAL_BATCHES}/{VAL_BATCHES} "
              "[00:00<00:00, 120.00it/s]\x1b[A")
        self.last_acc, self.last_vloss = acc, val_loss(loss, acc)
        # tqdm's close of a leave=False bar: a blank as long as its last draw, then back up
        write("\n\r" + " " * 80 + "\r\x1b[A" + self.bar(epoch, STEPS))

    def finish(self) -> None:
        write("\n")


class Keras(Style):
    """Keras' Progbar with dynamic display: 'Epoch k/N', then the bar redrawn with '\\b' * its
    width and '\\r', its end-of-epoch line carrying the val_ metrics. Keras 2 draws
    [==>...] (keras/utils/generic_utils.py), Keras 3 the ━ bar (keras/src/utils/progbar.py)."""

    name = "keras2"
    glyphs = 30

    def __init__(self, epochs: int, epoch_seconds: float, lr: float) -> None:
        super().__init__(epochs, epoch_seconds, lr)
        self.width = 0

    def graph(self, k: int) -> str:
        done = int(self.glyphs * k / STEPS)
        head = "=" * (done - 1) + (">" if k < STEPS else "=") if done else ""
        return "[" + head + "." * (self.glyphs - done) + "]"

    def line(self, k: int, timing: str, metrics: str) -> str:
        return f"{k:>{len(str(STEPS))}}/{STEPS} {self.graph(k)} - {timing} - {metrics}"

    def put(self, text: str) -> None:
        write("\b" * self.width + "\r" + text)
        self.width = len(text)

    def epoch_start(self, epoch: int) -> None:
        write(f"Epoch {epoch}/{self.epochs}\n")
        self.width = 0

    def acc_so_far(self, k: int) -> float:
        return (self.last_acc or 0.1) * k / STEPS + 0.1 * (1 - k / STEPS)

    def redraw(self, epoch: int, k: int, loss: float) -> None:
        eta = self.epoch_seconds * (1 - k / STEPS)
        self.put(self.line(k, f"ETA: {eta:.0f}s",
                           f"loss: {loss:.4f} - accuracy: {self.acc_so_far(k):.4f}"))

    def epoch_end(self, epoch: int, loss: float, acc: float) -> None:
        per_step = self.epoch_seconds / STEPS * 1000
        self.put(self.line(STEPS, f"{self.epoch_seconds:.0f}s {per_step:.0f}ms/step",
                           f"loss: {loss:.4f} - accuracy: {acc - 0.01:.4f} - "
                           f"val_loss: {val_loss(loss, acc):.4f} - val_accuracy: {acc:.4f}"))
        write("\n")
        self.last_acc = acc


class Keras3(Keras):
    name = "keras3"

    def graph(self, k: int) -> str:
        return "━" * 20

    def line(self, k: int, timing: str, metrics: str) -> str:
        return f"{k:>{len(str(STEPS))}}/{STEPS} {self.graph(k)} {timing} - {metrics}"

    def redraw(self, epoch: int, k: int, loss: float) -> None:
        per_step = self.epoch_seconds / STEPS * 1000
        eta = self.epoch_seconds * (1 - k / STEPS)
        self.put(self.line(k, f"{eta:.0f}s {per_step:.0f}ms/step",
                           f"accuracy: {self.acc_so_far(k):.4f} - loss: {loss:.4f}"))

    def epoch_end(self, epoch: int, loss: float, acc: float) -> None:
        per_step = self.epoch_seconds / STEPS * 1000
        self.put(self.line(STEPS, f"{self.epoch_seconds:.0f}s {per_step:.0f}ms/step",
                           f"accuracy: {acc - 0.01:.4f} - loss: {loss:.4f} - "
                           f"val_accuracy: {acc:.4f} - val_loss: {val_loss(loss, acc):.4f}"))
        write("\n")
        self.last_acc = acc


class Torchtune(Style):
    """torchtune's recipes: a tqdm bar per epoch described 'epoch|step|Loss: x'
    (recipes/full_finetune_single_device.py) and StdoutLogger's 'Step N | key:value ...'
    (torchtune/training/metric_logging.py). Its metric is the training loss."""

    name = "torchtune"

    def bar(self, epoch: int, k: int, loss: float) -> str:
        frac = k / STEPS
        return (f"\r{epoch}|{self.gstep(epoch, k)}|Loss: {loss}: {int(100 * frac):3d}%|"
                f"{tqdm_bar(frac)}| {k}/{STEPS} [{clock(frac * self.epoch_seconds)}<"
                f"{clock((1 - frac) * self.epoch_seconds)}, {self.epoch_seconds / STEPS:.2f}s/it]")

    def step_line(self, epoch: int, k: int, loss: float) -> None:
        step = self.gstep(epoch, k)
        lr = self.lr * (1 - step / self.total)
        write(self.bar(epoch, k, loss)
              + f"Step {step} | loss:{loss} lr:{lr} tokens_per_second_per_gpu:1234.5678\n")

    def redraw(self, epoch: int, k: int, loss: float) -> None:
        self.step_line(epoch, k, loss)

    def epoch_end(self, epoch: int, loss: float, acc: float) -> None:
        self.step_line(epoch, STEPS, loss)


class Timm(Style):
    """timm's train.py: 'Train: E [ b/n ( p%)]  Loss: x (avg) ...' lines (epochs from 0) and
    validate()'s 'Test: [ b/n]  ... Acc@1: x (avg)  Acc@5: ...', whose last batch holds the
    evaluation (the running averages in brackets)."""

    name = "timm"

    def redraw(self, epoch: int, k: int, loss: float) -> None:
        rate = STEPS / max(self.epoch_seconds, 1e-3) * 128
        write(f"Train: {epoch - 1} [{k:>4}/{STEPS} ({100 * k / STEPS:3.0f}%)]  "
              f"Loss: {loss:#.3g} ({loss:#.3g})  Time: {self.epoch_seconds / STEPS:.3f}s, "
              f"{rate:7.2f}/s  ({self.epoch_seconds / STEPS:.3f}s, {rate:7.2f}/s)  "
              f"LR: {self.lr:.3e}  Data: 0.010 (0.012)\n")

    def epoch_end(self, epoch: int, loss: float, acc: float) -> None:
        self.redraw(epoch, STEPS - 1, loss)
        vloss, top1 = val_loss(loss, acc), acc * 100
        top5 = min(100.0, top1 + 8.0) if not math.isnan(top1) else top1
        for b in (0, VAL_BATCHES):
            write(f"Test: [{b:>4}/{VAL_BATCHES}]  Time: 0.210 (0.250)  Loss: {vloss:7.4f} "
                  f"({vloss:6.4f})  Acc@1: {top1:7.4f} ({top1:7.4f})  Acc@5: {top5:7.4f} "
                  f"({top5:7.4f})\n")
        write(f"Current checkpoints:\n ('./output/train/fake-train/checkpoint-{epoch - 1}"
              f".pth.tar', {top1})\n\n")

    def finish(self) -> None:
        write("*** Best metric: see summary.csv\n")


class NanoGPT(Style):
    """nanoGPT's train.py: 'iter N: loss X, time Tms, mfu M%' every log_interval and
    'step N: train loss X, val loss Y' at each evaluation (here each epoch)."""

    name = "nanogpt"

    def redraw(self, epoch: int, k: int, loss: float) -> None:
        ms = self.epoch_seconds / STEPS * 1000
        write(f"iter {self.gstep(epoch, k)}: loss {loss:.4f}, time {ms:.2f}ms, mfu 12.30%\n")

    def epoch_end(self, epoch: int, loss: float, acc: float) -> None:
        write(f"step {self.gstep(epoch, STEPS)}: train loss {loss:.4f}, "
              f"val loss {val_loss(loss, acc):.4f}\n")


class Fairseq(Style):
    """fairseq-train (>= 0.10, SimpleProgressBar): in-epoch 'epoch 003:    100 / 380 loss=...'
    lines, the valid subset's summary 'epoch 003 | valid on 'valid' subset | loss X | ...'
    (fairseq_cli/train.py, validate) and the epoch's train summary."""

    name = "fairseq"

    def redraw(self, epoch: int, k: int, loss: float) -> None:
        write(f"epoch {epoch:03d}: {k:>6} / {STEPS} loss={loss:.3f}, "
              f"ppl={2 ** min(loss, 1000):.2f}, wps=41234.2, ups=4.12, wpb=10008.3, bsz=360.4, "
              f"num_updates={self.gstep(epoch, k)}, lr={self.lr:g}, gnorm=1.523, "
              f"train_wall=23, wall={int(epoch * self.epoch_seconds)}\n")

    def epoch_end(self, epoch: int, loss: float, acc: float) -> None:
        vloss = val_loss(loss, acc)
        updates = self.gstep(epoch, STEPS)
        write(f"epoch {epoch:03d} | valid on 'valid' subset | loss {vloss:.3f} | "
              f"ppl {2 ** min(vloss, 1000):.2f} | accuracy {acc * 100:.1f} | wps 98765.4 | "
              f"wpb 8012.5 | bsz 300.2 | num_updates {updates}\n")
        write(f"epoch {epoch:03d} | loss {loss:.3f} | ppl {2 ** min(loss, 1000):.2f} | "
              f"wps 40987.1 | ups 4.1 | num_updates {updates} | lr {self.lr:g} | "
              f"wall {int(epoch * self.epoch_seconds)}\n")


class Tqdm(Style):
    """A plain tqdm bar over the whole run (tqdm/std.py, format_meter), its postfix set with
    set_postfix(loss=..., acc=...): redrawn with \\r, one newline when it closes."""

    name = "tqdm"

    def __init__(self, epochs: int, epoch_seconds: float, lr: float) -> None:
        super().__init__(epochs, epoch_seconds, lr)
        self.post = ""

    def bar(self, step: int) -> str:
        frac = step / self.total
        elapsed = step / STEPS * self.epoch_seconds
        rate = STEPS / max(self.epoch_seconds, 1e-3)
        return (f"\r{int(100 * frac):3d}%|{tqdm_bar(frac)}| {step}/{self.total} "
                f"[{clock(elapsed)}<{clock((self.total - step) / rate)}, {rate:.1f}it/s"
                f"{', ' + self.post if self.post else ''}]")

    def redraw(self, epoch: int, k: int, loss: float) -> None:
        acc = f", acc={tqdm_num(self.last_acc)}" if self.last_acc is not None else ""
        self.post = f"loss={tqdm_num(loss)}{acc}"
        write(self.bar(self.gstep(epoch, k)))

    def epoch_end(self, epoch: int, loss: float, acc: float) -> None:
        self.last_acc = acc
        self.post = f"loss={tqdm_num(loss)}, acc={tqdm_num(acc)}"
        write(self.bar(self.gstep(epoch, STEPS)))

    def finish(self) -> None:
        write("\n")


CLASSES: dict[str, type[Style]] = {cls.name: cls for cls in (
    Style, HuggingFace, Lightning, Keras, Keras3, Torchtune, Timm, NanoGPT, Fairseq, Tqdm)}


def make(name: str, epochs: int, epoch_seconds: float, lr: float) -> Style:
    return CLASSES[name](epochs, epoch_seconds, lr)
