"""UI figures: one engine tick applied to the UI, time to first frame, `eq-tui --help`.

    .venv/bin/python bench/ui.py

- tick: 5,000 jobs of which 50 changed, applied to the app's state and widgets (best of 5;
  Textual's repaint runs on its own refresh cycle and is not included). Target < 30 ms.
- first frame: from creating the app to its first full screen (header, grid, 5,000-row table,
  panes) at 160x48, headless. Also with the 20-job demo snapshot.
- --help: wall time of `eq-tui --help` in a fresh interpreter (target < 0.3 s).
Writes bench/results/ui.json.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eq_tui.tui.app import EqTuiApp
from tests.tui.fake_client import T0, FakeClient, sample_snapshot
from tests.tui.test_tick_cost import big_snapshot, measure_tick_ms


async def first_frame_ms(snapshot: dict[str, object]) -> float:
    start = time.perf_counter()
    app = EqTuiApp([FakeClient(snapshot)], clock=lambda: T0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        return (time.perf_counter() - start) * 1000


def help_ms(repeat: int = 5) -> float:
    """`eq-tui --help` as a user runs it: the installed entry point in a fresh process."""
    entry = Path(sys.executable).parent / "eq-tui"
    command = [str(entry)] if entry.exists() else [sys.executable, "-m", "eq_tui"]
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([*command, "--help"], check=True, capture_output=True)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def run() -> dict[str, float]:
    return {"tick_5000_jobs_50_changed_ms": asyncio.run(measure_tick_ms(rounds=5)),
            "first_frame_5000_jobs_ms": asyncio.run(first_frame_ms(big_snapshot())),
            "first_frame_demo_ms": asyncio.run(first_frame_ms(sample_snapshot())),
            "help_ms": help_ms()}


def main() -> None:
    rows = run()
    tick, helped = rows["tick_5000_jobs_50_changed_ms"], rows["help_ms"]
    print(f"UI tick, 50 of 5,000 jobs changed: {tick:.1f} ms (target < 30 ms, "
          f"ratio {tick / 30:.2f})")
    print(f"time to first frame: {rows['first_frame_demo_ms']:.0f} ms (demo snapshot), "
          f"{rows['first_frame_5000_jobs_ms']:.0f} ms (5,000 jobs)")
    print(f"eq-tui --help: {helped:.0f} ms (target < 300 ms, ratio {helped / 300:.2f})")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "ui.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
