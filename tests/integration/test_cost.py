"""What each run cost, on real screen sessions with simulated GPUs: GPU-seconds and energy
metered from the probes' power readings. The figures are checked against the sim's own: its
power model over the runs its jobs recorded on the host (runs.jsonl), not the engine's view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eq_tui.cli.main import main
from eq_tui.hosts.factory import sim_state_dir
from eq_tui.manifest.model import HostSpec, SimulateSpec
from eq_tui.results.cost import energy_text
from eq_tui.sim.state import energy_split, init_sim_state, run_intervals, set_power
from tests.support.engine_run import job, make_manifest, run_to_end

pytestmark = pytest.mark.integration
GPU_MIB = 24576


def one_gpu() -> tuple[HostSpec, ...]:
    return (HostSpec(name="sim", max_parallel=4,
                     simulate=SimulateSpec(gpus=1, memory_mib=GPU_MIB)),)


def train(util: int, seconds: float, mem: int = 4000) -> str:
    return f"fake-train --epochs 4 --epoch-seconds {seconds / 4} --mem {mem} --util {util}"


def attempt(state: dict[str, object], job_id: str) -> dict[str, object]:
    jobs = state["jobs"]
    assert isinstance(jobs, list)
    return next(j for j in jobs if j["id"] == job_id)["history"][-1]  # type: ignore[no-any-return]


async def test_two_jobs_on_one_card_each_get_their_share_of_its_energy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # packed on one GPU by memory; "hot" computes 4x as much as "cool"
    jobs = [job("hot", train(80, 12.0), mem_mib=4000),
            job("cool", train(20, 12.0), mem_mib=4000)]
    code, run = await run_to_end(make_manifest(tmp_path, jobs, hosts=one_gpu()),
                                 tmp_path / "run")
    assert code == 0
    spans = {i.job: i for i in run_intervals(run.runs())}
    assert spans["hot"].start < spans["cool"].end and spans["cool"].start < spans["hot"].end
    state = run.state
    hot, cool = attempt(state, "hot"), attempt(state, "cool")
    # from the first attempt's start to the last one's end, as the hosts recorded them (the
    # engine charges an attempt from its wrapper's start, before its process is on the GPU)
    first = min(float(a["start"]) for a in (hot, cool))  # type: ignore[arg-type]
    last = max(float(a["end"]) for a in (hot, cool))  # type: ignore[arg-type]
    card, parts = energy_split(sim_state_dir(run.run_dir, "sim"), 0, first, last)
    with capsys.disabled():  # the figures, for a person reading the run
        print(f"\nsim: card {card:.0f} J, hot {parts[('hot', 1)]:.0f} J, cool "
              f"{parts[('cool', 1)]:.0f} J; engine: hot {hot['energy_j']:.0f} J, cool "
              f"{cool['energy_j']:.0f} J")
    assert isinstance(hot["energy_j"], float) and isinstance(cool["energy_j"], float)
    assert not hot["energy_gap"] and not cool["energy_gap"]
    # each its own share, by its utilisation (the sim's pmon) ...
    # (to within the probes' intervals: a job's process starts and ends a moment after and
    # before its wrapper's records, and power between probes is a mean)
    assert hot["energy_j"] == pytest.approx(parts[("hot", 1)], rel=0.25)
    assert cool["energy_j"] == pytest.approx(parts[("cool", 1)], rel=0.25)
    assert hot["energy_j"] > 2 * cool["energy_j"]
    # ... and the shares add up to the card's energy over their time together
    assert hot["energy_j"] + cool["energy_j"] == pytest.approx(card, rel=0.15)
    # GPU-seconds: their time on the one GPU, split the same way
    gpu_s = {a: float(x["end"]) - float(x["start"]) - float(x["shared_off_s"])  # type: ignore[arg-type]
             for a, x in (("hot", hot), ("cool", cool))}
    assert gpu_s["hot"] > gpu_s["cool"] > 0
    assert sum(gpu_s.values()) == pytest.approx(last - first, rel=0.2)

    # results --format json: GPU-hours and energy per configuration, and the sweep's totals
    capsys.readouterr()
    assert main(["results", str(run.run_dir), "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    rows = {row["jobs"][0]: row["cost"] for row in table["rows"]}
    assert rows["hot"]["energy_wh"]["mean"] == pytest.approx(hot["energy_j"] / 3600, rel=0.01)
    assert rows["hot"]["gpu_hours"]["mean"] == pytest.approx(gpu_s["hot"] / 3600, abs=0.01 / 3600)
    assert table["cost"]["energy_wh"] == pytest.approx(
        (hot["energy_j"] + cool["energy_j"]) / 3600, rel=0.01)
    summary = (run.run_dir / "summary.md").read_text()
    assert "## Cost" in summary
    assert f"- energy: {energy_text(hot['energy_j'] + cool['energy_j'])}" in summary


async def test_a_card_without_power_readings_gives_gpu_seconds_and_unknown_energy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state_dir = sim_state_dir(tmp_path / "run", "sim")
    init_sim_state(state_dir, host="sim", gpus=1, memory_mib=GPU_MIB)
    set_power(state_dir, reading=False)  # power.draw reads [N/A]
    code, run = await run_to_end(
        make_manifest(tmp_path, [job("a", "fake-train --epochs 2 --epoch-seconds 0.5")],
                      hosts=one_gpu()), tmp_path / "run")
    assert code == 0
    a = attempt(run.state, "a")
    assert a["energy_gap"] is True
    assert float(a["end"]) - float(a["start"]) > 0.9  # type: ignore[arg-type]
    line = json.loads((run.run_dir / "results.jsonl").read_text().splitlines()[0])
    assert line["cost"]["energy_j"] is None  # unknown, never 0
    assert line["cost"]["gpu_s"] > 0.9
    assert main(["results", str(run.run_dir)]) == 0
    out = capsys.readouterr().out
    assert "energy unknown: 1 (no power reading)" in out
    assert "energy unknown (some GPUs had no power reading)" in out
    assert "- energy: unknown (no power reading" in (run.run_dir / "summary.md").read_text()
