"""Results figures: the results table of 1,000 finished jobs, results.jsonl, the results screen.

    .venv/bin/python bench/results.py

- table: results.jsonl of 1,000 finished jobs (100 configurations x 10 seeds, 3 metrics, a
  64-point series each) read, grouped and rendered as `eq-tui results` does, in-process
  (median of 7). Target < 200 ms.
- write: the engine's results.jsonl for those 1,000 jobs (records built, written atomically).
- parse: the metrics of one 1,000-line results.jsonl and of a 1,000-line log (the read at a
  job's end).
- live: `key=value` numbers of 1,000 running jobs' last log lines (what the UI parses per tick).
- screen: from pressing R to the results screen drawn, with 1,000 finished jobs (best of 3).
  Target < 0.5 s.
Writes bench/results/results.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eq_tui.cli.results import build_parser, table_text
from eq_tui.results.parse import log_numbers, parse_jsonl, parse_log
from eq_tui.results.records import dumps, make_record, read_records
from eq_tui.results.settings import ResultSettings
from eq_tui.runfiles.atomic import write_atomic

OUT = Path(__file__).resolve().parent / "results"
GOALS = {"val_acc": "max", "loss": "min", "f1": "max"}


def finished_records(jobs: int = 1000, seeds: int = 10) -> list[dict[str, Any]]:
    rng = random.Random(0)
    records = []
    for i in range(jobs):
        config, seed = divmod(i, seeds)
        params = {"lr": str(10 ** -(1 + config % 4)), "width": str(64 * (1 + config // 4)),
                  "seed": str(seed)}
        metrics = {name: [rng.random() for _ in range(200)] for name in GOALS}
        records.append(make_record(job_id=f"j{i}", phase="train", params=params, attempt=1,
                                   status="completed" if rng.random() > 0.02 else "stuck",
                                   metrics=metrics, collected_at=1.0))
    return records


def median_ms(work: Callable[[], object], repeat: int = 7) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


async def screen_ms(records: list[dict[str, Any]]) -> tuple[float, float]:
    """(R to the results screen drawn, ? to the help screen drawn): the second is Textual's own
    cost of opening a screen over this app, for comparison on a loaded machine."""
    from eq_tui.tui.app import EqTuiApp
    from eq_tui.tui.screens.help import HelpScreen
    from eq_tui.tui.screens.results import ResultsScreen
    from tests.tui.fake_client import T0, FakeClient, job, sample_snapshot

    snapshot = sample_snapshot()
    snapshot["jobs"] = [job(r["id"], r["status"], params=r["params"], metrics=r["metrics"])
                        for r in records]
    snapshot["settings"].update(goals=GOALS, group_over="seed")
    app = EqTuiApp([FakeClient(snapshot)], clock=lambda: T0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause(0.5)
        took = []
        for key, screen in (("R", ResultsScreen), ("question_mark", HelpScreen)):
            start = time.perf_counter()
            await pilot.press(key)
            while not isinstance(app.screen, screen):
                await pilot.pause(0.001)
            await pilot.pause()
            took.append((time.perf_counter() - start) * 1000)
            await pilot.press("escape")
            await pilot.pause(0.3)
        return took[0], took[1]


def run() -> dict[str, float]:
    records = finished_records()
    options = build_parser().parse_args(["x"])
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        write_atomic(run_dir / "results.jsonl", dumps(records))
        size_kib = (run_dir / "results.jsonl").stat().st_size / 1024

        def table() -> str:
            loaded = read_records(run_dir) or []
            return table_text(loaded, ResultSettings(goals=GOALS), options)

        figures = {
            "table_1000_jobs_ms": median_ms(table),
            "write_1000_jobs_ms": median_ms(
                lambda: write_atomic(run_dir / "w.jsonl", dumps(records))),
            "results_jsonl_kib": size_kib,
        }
    lines = "\n".join(json.dumps({"step": i, "loss": 1 / (i + 1), "val_acc": i / 1000})
                      for i in range(1000))
    log = [f"epoch {i} step {i * 10} loss={1 / (i + 1):.4f} val_acc={i / 1000:.4f}"
           for i in range(1000)]
    figures["parse_jsonl_1000_lines_ms"] = median_ms(lambda: parse_jsonl(lines))
    figures["parse_log_1000_lines_ms"] = median_ms(lambda: parse_log(log))
    figures["live_1000_last_lines_ms"] = median_ms(lambda: [log_numbers(x) for x in log])
    screens = [asyncio.run(screen_ms(records)) for _ in range(3)]
    figures["screen_1000_jobs_ms"] = min(r for r, _ in screens)
    figures["help_screen_same_app_ms"] = min(h for _, h in screens)
    from eq_tui.api import ProjectState
    from eq_tui.tui.screens.results import project_table, signature

    state = ProjectState(project="p", settings={"goals": GOALS}, jobs={
        r["id"]: {"id": r["id"], "phase": r["phase"], "status": r["status"],
                  "params": r["params"], "metrics": r["metrics"]} for r in records})
    figures["screen_rows_1000_jobs_ms"] = median_ms(lambda: (signature([state]),
                                                             project_table(state)))
    return figures


def main() -> None:
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    figures = run()
    print(f"results table, 1,000 finished jobs: {figures['table_1000_jobs_ms']:.1f} ms "
          "(target < 200 ms)")
    print(f"results.jsonl written, 1,000 jobs: {figures['write_1000_jobs_ms']:.1f} ms "
          f"({figures['results_jsonl_kib']:.0f} KiB)")
    print(f"metrics of a 1,000-line results.jsonl: {figures['parse_jsonl_1000_lines_ms']:.1f} ms;"
          f" of a 1,000-line log: {figures['parse_log_1000_lines_ms']:.1f} ms")
    print(f"live numbers of 1,000 last log lines: {figures['live_1000_last_lines_ms']:.1f} ms")
    print(f"results screen, 1,000 jobs, R to drawn: {figures['screen_1000_jobs_ms']:.0f} ms "
          f"(target < 500 ms; the help screen over the same app: "
          f"{figures['help_screen_same_app_ms']:.0f} ms; the screen's own rows: "
          f"{figures['screen_rows_1000_jobs_ms']:.1f} ms)")
    OUT.mkdir(exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
