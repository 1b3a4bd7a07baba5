"""bench/search.py's figures (the run itself takes minutes: not in the suite): the median best,
its gap to the grid's best in %, the GPU-hours ratios and the two targets at their edges; the
GPU-hours and best read the same way for grid and search; and its two manifests load as a run
would load them (216 grid jobs over the space the search samples)."""

from __future__ import annotations

from typing import Any

import pytest

from bench import search as bench
from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.manifest.loader import load_manifest_text


def runs(*pairs: tuple[float, float]) -> list[dict[str, Any]]:
    return [{"best": best, "gpu_hours": hours} for best, hours in pairs]


def test_median_gap_and_ratios() -> None:
    out = bench.figures(0.92, 10.0, runs((0.90, 2.0), (0.91, 2.5), (0.93, 2.9)))
    assert out["median_best"] == 0.91
    assert out["gap_pct"] == pytest.approx((0.92 - 0.91) / 0.92 * 100)
    assert out["share_median"] == pytest.approx(0.25)
    assert out["share_max"] == pytest.approx(0.29)
    assert out["gap_met"] is False and out["share_met"] is True
    even = bench.figures(0.92, 10.0, runs((0.90, 1.0), (0.91, 1.0), (0.93, 1.0), (0.94, 4.0)))
    assert even["median_best"] == pytest.approx(0.92) and even["gap_pct"] == pytest.approx(0)
    assert even["share_median"] == pytest.approx(0.1) and even["share_met"] is False


def test_a_search_better_than_the_grid_has_a_negative_gap() -> None:
    out = bench.figures(0.90, 1.0, runs((0.918, 0.2)))
    assert out["gap_pct"] == pytest.approx(-2.0) and out["gap_met"] is True


def test_targets_at_their_edges() -> None:
    assert bench.figures(200.0, 10.0, runs((199.0, 3.0)))["gap_met"] is True  # 0.5 % exactly
    assert bench.figures(200.0, 10.0, runs((198.99, 3.0)))["gap_met"] is False
    assert bench.figures(200.0, 10.0, runs((199.0, 3.0)))["share_met"] is True  # 30 % exactly
    assert bench.figures(200.0, 10.0, runs((199.0, 3.01)))["share_met"] is False


def job(status: JobStatus, acc: float | None, *spans: tuple[float | None, float | None, int],
        ) -> JobState:
    history = [Attempt(n=i + 1, host="sim", gpus=list(range(gpus)), session="s",
                       attempt_dir="", log="", start=start, end=end)
               for i, (start, end, gpus) in enumerate(spans)]
    return JobState(id="j", phase="main", cmd="x", status=status, history=history,
                    metrics={} if acc is None else {"val_acc": acc})


def test_gpu_hours_and_best_from_the_ledger() -> None:
    jobs = [job(JobStatus.COMPLETED, 0.8, (0.0, 1800.0, 1), (2000.0, 3800.0, 2)),
            job(JobStatus.FAILED_OOM, 0.95, (0.0, 3600.0, 1)),
            job(JobStatus.COMPLETED, 0.85, (None, None, 1), (0.0, None, 1)),
            job(JobStatus.COMPLETED, None, (0.0, 0.0, 1))]
    assert bench.gpu_hours(jobs) == pytest.approx(0.5 + 1.0 + 1.0)
    assert bench.best_value(jobs) == 0.85  # the failed job's 0.95 does not count
    assert bench.best_value(jobs[1:2]) is None


@pytest.mark.parametrize("setup", [bench.FULL, bench.QUICK])
def test_the_manifests_load(setup: bench.Setup) -> None:
    grid = load_manifest_text(bench.grid_manifest(setup), "grid.yaml")
    size = len(setup.lrs) * len(setup.widths) * len(setup.dropouts)
    assert len(grid.jobs) == len({j.id for j in grid.jobs}) == size
    cmds = {j.cmd.split(" --seed")[0].split("fake-train ")[1] for j in grid.jobs}
    assert f"--landscape --lr {setup.lrs[0]} --width {setup.widths[-1]} --dropout " \
           f"{setup.dropouts[1]}" in cmds
    search = load_manifest_text(bench.search_manifest(setup, 7, "random", 3, 0.5), "search.yaml")
    spec = search.phases[0].search
    assert spec is not None and (spec.trials, spec.sampler, spec.seed) == (7, "random", 3)
    assert spec.gpu_hours == 0.5
    space = {p.name: p for p in spec.space}
    assert space["lr"].log and float(space["lr"].low) == float(setup.lrs[0])
    assert float(space["lr"].high) == float(setup.lrs[-1])
    assert tuple(map(int, space["width"].choices)) == setup.widths
    assert float(space["dropout"].high) == float(setup.dropouts[-1])
    assert search.hosts[0].simulate is not None and search.hosts[0].simulate.gpus == bench.GPUS
    assert size == 216 or setup is bench.QUICK
