"""Numbers a person reads (issue 46): a mean ± std rounded to the std's two significant digits,
the mean to the same decimal; GPU time and energy in the unit that fits; full precision kept
where a program reads them (JSON, CSV)."""

from __future__ import annotations

import json

import pytest

from eq_tui.results.group import group
from eq_tui.results.numbers import energy, gpu_time, mean_std
from eq_tui.results.records import make_record
from eq_tui.results.render import render_csv, render_json, render_table


@pytest.mark.parametrize(("mean", "std", "text"), [
    (0.763, 0.009991, "0.763 ± 0.010"),  # the std rounds up to the next decade: one digit less
    (0.2574, 0.009626, "0.2574 ± 0.0096"),
    (0.0009104, 1.229e-05, "0.000910 ± 0.000012"),
    (12345.6, 123.0, "12350 ± 120"),
    (0.75, 0.1735, "0.75 ± 0.17"),
    (-0.5, 0.25, "-0.50 ± 0.25"),
    (1.234e-7, 5.6e-9, "(1.234 ± 0.056)e-07"),
    (5.0, 0.0, "5 ± 0"),
    (0.123456, None, "0.1235"),
    (None, None, "-"),
])
def test_mean_and_std_read_as_a_person_writes_them(mean: float | None, std: float | None,
                                                   text: str) -> None:
    assert mean_std(mean, std) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (0.0, "0 GPU-s"), (42.4, "42 GPU-s"), (198.0, "3.3 GPU-min"), (5040.0, "1.4 GPU-h"),
    (3600 * 123.4, "123 GPU-h")])
def test_gpu_time_in_the_unit_that_fits(seconds: float, text: str) -> None:
    assert gpu_time(seconds) == text


@pytest.mark.parametrize(("wh", "text"), [
    (None, "-"), (0.2574, "0.26 Wh"), (21.4, "21 Wh"), (1400.0, "1.4 kWh")])
def test_energy_in_wh_or_kwh(wh: float | None, text: str) -> None:
    assert energy(wh) == text


def test_the_table_rounds_and_json_and_csv_keep_full_precision() -> None:
    """The sweep of the issue: `0.763 ± 0.009991`, `0.0009104 ± 1.229e-05` GPU-h and
    `0.2574 ± 0.009626` Wh as printed before; now as a person writes them."""
    accs, gpu_s, joules = (0.7535, 0.763, 0.7725), (3.2, 3.28, 3.35), (890.0, 927.0, 962.0)
    records = [{**make_record(job_id=f"lr0.1_s{seed}", phase="train",
                              params={"lr": "0.1", "seed": str(seed)}, attempt=1,
                              status="completed", metrics={"val_acc": [acc]}),
                "cost": {"gpu_s": gpu, "energy_j": j}}
               for seed, acc, gpu, j in zip((1, 2, 3), accs, gpu_s, joules, strict=True)]
    table = group(records)
    text = render_table(table)
    row = text.splitlines()[2]
    assert "0.7630 ± 0.0095" in row, text
    assert "3.277 ± 0.075 GPU-s" in row and "0.257 ± 0.010 Wh" in row, text
    assert "cost in all: 9.8 GPU-s, energy 0.77 Wh" in text
    data = json.loads(render_json(table))["rows"][0]
    assert data["metrics"]["val_acc"]["mean"] == pytest.approx(sum(accs) / 3, abs=1e-15)
    assert data["cost"]["gpu_hours"]["mean"] == pytest.approx(sum(gpu_s) / 3 / 3600, rel=1e-12)
    assert repr(sum(accs) / 3) in render_csv(table)
