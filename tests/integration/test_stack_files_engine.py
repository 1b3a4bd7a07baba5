"""A finished job on a real session gets its metrics from what its stack wrote in the shared
cwd, with no `metrics:` key: HF Trainer's trainer_state.json and Lightning's metrics.csv (the
verbatim fixtures, copied by the job as the stack writes them) — each job its own file only."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from eq_tui.results.records import read_records
from tests.support.engine_run import job, make_manifest, run_to_end, sim_hosts

FILES = Path(__file__).parents[1] / "fixtures" / "files"


def copy(name: str, dest: str) -> str:
    return (f"mkdir -p {shlex.quote(str(Path(dest).parent))} && "
            f"cp {shlex.quote(str(FILES / name))} {shlex.quote(dest)}")


@pytest.mark.asyncio
async def test_metrics_from_the_files_the_stacks_wrote(tmp_path: Path) -> None:
    jobs = [
        # HF Trainer with --output_dir out_hf: a checkpoint's state, then save_state()'s
        job("hf", f"{copy('hf_trainer_state_train.json', 'out_hf/checkpoint-2/trainer_state.json')}"
                  f" && {copy('hf_trainer_state_eval.json', 'out_hf/trainer_state.json')}"),
        # Lightning's default CSVLogger dir in the cwd
        job("pl", copy("lightning_metrics_val.csv", "lightning_logs/version_0/metrics.csv")),
    ]
    work = tmp_path / "work"
    work.mkdir()
    # one GPU: the jobs run one after the other in one cwd, each sees the other's files
    manifest = make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 1)), cwd=str(work))
    code, _ = await run_to_end(manifest, tmp_path / "run", timeout=90)
    assert code == 0
    records = {r["id"]: r for r in read_records(tmp_path / "run") or []}
    hf, pl = records["hf"], records["pl"]
    assert hf["sources"] == ["out_hf/trainer_state.json"]
    assert hf["metrics"]["eval_accuracy"] == 0.9180227202947497
    assert len(hf["series"]["eval_accuracy"]) == 3
    assert "train_runtime" not in hf["metrics"]  # the checkpoint's older state is not read
    assert pl["sources"] == ["lightning_logs/version_0/metrics.csv"]
    assert pl["metrics"] == {"train_loss": 0.19502906501293182, "val_loss": 0.14366206526756287}
    assert "eval_accuracy" not in pl["metrics"]  # hf's file, written before pl started
