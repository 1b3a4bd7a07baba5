"""What tqdm bars write to a log file, write by write, for tests of the log pane's lines."""

from __future__ import annotations


class Bar:
    """One tqdm bar's writes: tqdm/std.py `status_printer.print_status` at `position`, the
    moves of `tqdm.display`/`tqdm.moveto` around it."""

    def __init__(self, stream: list[str], position: int) -> None:
        self.stream, self.position, self.last_len = stream, position, 0

    def draw(self, text: str) -> None:
        pad = " " * max(self.last_len - len(text), 0)
        self.last_len = len(text)
        self.stream.append("\n" * self.position + "\r" + text + pad
                           + "\x1b[A" * self.position)


def lightning_log(epochs: int, *, val_batches: int = 30, steps: int = 5) -> list[str]:
    """The writes of Lightning 2.x's TQDMProgressBar (callbacks/progress/tqdm_progress.py) for a
    fit: one main bar at position 0, reset and described `Epoch N` each epoch (never a new
    line), and each validation a new bar at position 1 with leave=False, redrawn per batch,
    the main bar's postfix set to the validation values before that bar closes."""
    stream: list[str] = ["GPU available: True (cuda), used: True\n"]
    main = Bar(stream, 0)
    postfix = "v_num=0"
    for epoch in range(epochs):
        for step in range(steps + 1):
            pct = 100 * step // steps
            main.draw(f"Epoch {epoch}: {pct:3d}%|{'█' * (pct // 10):<10}| {step}/{steps} "
                      f"[00:0{step}<00:0{steps - step}, 12.05it/s, {postfix}]")
        val = Bar(stream, 1)
        for batch in range(val_batches + 1):
            pct = 100 * batch // val_batches
            val.draw(f"Validation DataLoader 0: {pct:3d}%|{'█' * (pct // 10):<10}| "
                     f"{batch}/{val_batches} [00:00<00:00, 120.00it/s]")
        postfix = f"v_num=0, val_loss={0.9 - 0.1 * epoch:.3f}"
        main.draw(f"Epoch {epoch}: 100%|██████████| {steps}/{steps} [00:0{steps}<00:00, "
                  f"12.05it/s, {postfix}]")
        val.draw("")  # tqdm.close, leave=False: blanks at its position
    return stream
