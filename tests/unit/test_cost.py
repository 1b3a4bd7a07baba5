"""What a run cost, the pure parts: power out of nvidia-smi's CSV, a GPU's mean power between
two probes, the shares of a shared GPU, a job's figures from its attempts, and the table's."""

from __future__ import annotations

import json

import pytest

from eq_tui.engine.tick.cost import gpu_shares, interval_watts
from eq_tui.hosts.base import GpuProcess, GpuReading, HostSnapshot
from eq_tui.hosts.gpu_csv import parse_gpus
from eq_tui.results.cost import cost_record, energy_text, job_cost
from eq_tui.results.group import group
from eq_tui.results.records import make_record
from eq_tui.results.render import render_csv, render_json, render_table


def test_power_rides_in_the_gpu_query_and_na_is_unknown() -> None:
    gpus, warnings = parse_gpus("0, GPU-a, H100, 100, 81559, 97, 312.45\n"
                                "1, GPU-b, T4, 100, 15360, 0, [N/A]\n"
                                "2, GPU-c, old, 100, 15360, 0\n")  # an older probe's 6 fields
    assert warnings == []
    assert [g.power_w for g in gpus] == [312.45, None, None]


def test_mean_power_is_the_counter_where_both_readings_have_it_else_the_trapezoid() -> None:
    assert interval_watts((10.0, 100.0, 5000.0), (12.0, 300.0, 5500.0)) == 250.0  # counter
    assert interval_watts((10.0, 100.0, None), (12.0, 300.0, None)) == 200.0  # trapezoid
    assert interval_watts(None, (12.0, 300.0, None)) == 300.0  # the first probe: its own
    assert interval_watts((10.0, 100.0, None), (12.0, None, None)) == 100.0
    assert interval_watts((10.0, None, None), (12.0, None, None)) is None  # [N/A]: unknown
    # a counter that went back (the driver reloaded): the power readings instead
    assert interval_watts((10.0, 100.0, 5000.0), (12.0, 300.0, 10.0)) == 200.0


def snapshot(processes: list[GpuProcess]) -> HostSnapshot:
    return HostSnapshot(host="h", ok=True, taken_at=0.0,
                        gpus=(GpuReading(0, "G0", "sim", 9000, 24576, 90, 250.0),),
                        processes=tuple(processes))


def test_a_shared_gpu_is_split_by_utilisation_else_memory_else_equally() -> None:
    by_util = snapshot([GpuProcess(1, "G0", 6000, pgid=1, util_pct=75),
                        GpuProcess(2, "G0", 2000, pgid=2, util_pct=25)])
    assert gpu_shares(by_util, {0: ["a", "b"]}, {"a": 1, "b": 2}) == {"a": {0: 0.75},
                                                                     "b": {0: 0.25}}
    # someone else's process computes too: it keeps its share
    other = snapshot([GpuProcess(1, "G0", 6000, pgid=1, util_pct=50),
                      GpuProcess(9, "G0", 2000, pgid=9, util_pct=50)])
    assert gpu_shares(other, {0: ["a"]}, {"a": 1}) == {"a": {0: 0.5}}
    by_memory = snapshot([GpuProcess(1, "G0", 6000, pgid=1, util_pct=0),
                          GpuProcess(2, "G0", 2000, pgid=2, util_pct=0)])
    assert gpu_shares(by_memory, {0: ["a", "b"]}, {"a": 1, "b": 2}) == {"a": {0: 0.75},
                                                                       "b": {0: 0.25}}
    # a sample in which nobody computed keeps the last split (a gap in pmon's samples)
    assert gpu_shares(by_memory, {0: ["a", "b"]}, {"a": 1, "b": 2},
                      {"a": {0: 0.9}, "b": {0: 0.1}}) == {"a": {0: 0.9}, "b": {0: 0.1}}
    nothing_yet = snapshot([])
    assert gpu_shares(nothing_yet, {0: ["a", "b"]}, {"a": None, "b": None}) == {
        "a": {0: 0.5}, "b": {0: 0.5}}
    # nothing there any more (both between their last process and their end): as they were
    assert gpu_shares(nothing_yet, {0: ["a", "b"]}, {"a": 1, "b": 2},
                      {"a": {0: 0.8}, "b": {0: 0.2}}) == {"a": {0: 0.8}, "b": {0: 0.2}}
    # one process alone: all its (the other's is gone or not there yet), whatever was before
    alone = snapshot([GpuProcess(2, "G0", 2000, pgid=2)])
    assert gpu_shares(alone, {0: ["a", "b"]}, {"a": 1, "b": 2},
                      {"a": {0: 0.8}, "b": {0: 0.2}}) == {"a": {0: 0.0}, "b": {0: 1.0}}


def test_a_jobs_cost_sums_its_attempts_and_unknown_energy_stays_unknown() -> None:
    failed = {"start": 0.0, "end": 100.0, "gpus": [0, 1], "energy_j": 1000.0}
    done = {"start": 200.0, "end": 300.0, "gpus": [0], "shared_off_s": 40.0, "energy_j": 500.0}
    assert job_cost([failed, done]) == (200.0 + 60.0, 1500.0)
    slurm = {"start": 0.0, "end": 10.0, "gpus": [0], "energy_j": None, "energy_gap": True}
    assert job_cost([slurm]) == (10.0, None)
    gap = {"start": 0.0, "end": 10.0, "gpus": [0], "energy_j": 99.0, "energy_gap": True}
    assert job_cost([done, gap]) == (70.0, None)  # partial energy is never shown as known
    never = {"start": None, "end": None, "gpus": [0], "launched": False}
    assert job_cost([never]) == (0.0, 0.0)
    running = {"start": 0.0, "end": None, "gpus": [0], "metered_until": 30.0, "energy_j": 5.0}
    assert job_cost([running]) == (30.0, 5.0)
    assert job_cost([running], now=50.0) == (50.0, 5.0)
    assert cost_record([slurm]) == {"gpu_s": 10.0, "energy_j": None}
    assert energy_text(None) == "-" and energy_text(7200.0) == "2.0 Wh"


def record(job: str, seed: int, status: str, gpu_s: float, joules: float | None) -> dict:
    rec = make_record(job_id=f"{job}_s{seed}", phase="train",
                      params={"lr": job, "seed": str(seed)}, attempt=1, status=status,
                      metrics={"acc": [0.5]})
    return {**rec, "cost": {"gpu_s": gpu_s, "energy_j": joules}}


def test_the_table_gives_each_configuration_its_cost_and_the_sweep_its_total() -> None:
    records = [record("0.1", 1, "completed", 3600, 3600 * 100),
               record("0.1", 2, "completed", 7200, 3600 * 300),
               record("0.1", 3, "pruned", 1800, 3600 * 50),
               record("0.3", 1, "completed", 3600, None)]
    table = group(records)
    data = json.loads(render_json(table))
    cost = {row["params"]["lr"]: row["cost"] for row in data["rows"]}
    assert cost["0.1"]["gpu_hours"] == {"n": 2, "mean": 1.5, "std": pytest.approx(0.7071, 1e-3),
                                        "total": 3.5}
    assert cost["0.1"]["energy_wh"]["mean"] == 200.0
    assert cost["0.1"]["energy_wh"]["total"] == 450.0
    assert cost["0.3"]["energy_wh"] == {"n": 0, "mean": None, "std": None, "total": None,
                                        "unknown": 1}
    assert data["cost"] == {"gpu_hours": 4.5, "energy_wh": None}
    text = render_table(table)
    assert "GPU time" in text and "1.50 ± 0.71 GPU-h" in text and "200 ± 140 Wh" in text
    assert "energy unknown: 1 (no power reading)" in text
    assert "cost in all: 4.5 GPU-h, energy unknown" in text
    assert render_csv(table).splitlines()[0].endswith("gpu_h_mean,gpu_h_std,gpu_h_total,"
                                                      "energy_wh_mean,energy_wh_std,"
                                                      "energy_wh_total")


def test_records_from_before_costs_were_kept_show_no_cost_columns() -> None:
    records = [make_record(job_id="a", phase="p", params={}, attempt=1, status="completed",
                           metrics={"acc": [0.5]})]
    table = group(records)
    assert "GPU time" not in render_table(table)
    assert "cost" not in json.loads(render_json(table))
