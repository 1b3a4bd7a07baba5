"""A job that saves its work on SIGTERM, as trainers do: `saving_job.py DIR NAME [MODE]`.
MODE `save` (default): on SIGTERM it takes 2 s (its checkpoint), writes DIR/NAME.saved and
exits 0. MODE `ignore`: it notes SIGTERM and goes on (only SIGKILL ends it). Every signal it
gets is appended to DIR/NAME.signals, one name a line; DIR/NAME.ready says its handlers are in."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from types import FrameType

NOTED = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1,
         signal.SIGUSR2, signal.SIGPIPE)


def main() -> None:
    where, name = Path(sys.argv[1]), sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "save"
    termed: list[float] = []

    def note(signum: int, _frame: FrameType | None) -> None:
        with open(where / f"{name}.signals", "a") as out:
            out.write(signal.Signals(signum).name + "\n")
        if signum == signal.SIGTERM:
            termed.append(time.monotonic())

    for one in NOTED:
        signal.signal(one, note)
    (where / f"{name}.ready").write_text("ready\n")
    print("training", flush=True)
    while not termed or mode == "ignore":
        time.sleep(0.05)
    while time.monotonic() - termed[0] < 2.0:  # the checkpoint takes its time
        time.sleep(0.05)
    print("saving checkpoint", flush=True)
    (where / f"{name}.saved").write_text("saved\n")


if __name__ == "__main__":
    main()
