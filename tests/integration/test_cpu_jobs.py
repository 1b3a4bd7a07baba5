"""A CPU-only job (gpus_per_job 0) end to end outside the scheduler's packing: placed with no
GPU by --dry-run's plan, launched with no GPU on an in-memory host, and submitted to Slurm
without any --gres (a stand-in runner: no Slurm needed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from eq_tui.cli.dry_run import first_wave
from eq_tui.hosts.base import LaunchRequest
from eq_tui.hosts.runner import CommandResult
from eq_tui.hosts.slurm import SlurmHost, sbatch_options
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import SlurmSpec
from tests.integration.test_ledger import started


def test_sbatch_asks_for_gpus_only_for_a_job_that_has_some() -> None:
    spec = SlurmSpec(partition="cpu")
    assert sbatch_options(spec, 0) == ["--no-requeue", "--partition=cpu"]
    assert sbatch_options(spec, 2)[:2] == ["--gres=gpu:2", "--no-requeue"]


class Recorder:
    """A CommandRunner that answers every command with a Slurm job id and keeps the args."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def run(self, script: str, args: Sequence[str] = (), *, stdin: bytes = b"",
                  timeout: float | None = 30.0) -> CommandResult:
        self.calls.append(list(args))
        return CommandResult(0, b"42\n", b"")

    async def close(self) -> None:
        return None


async def test_slurm_submits_a_job_launched_with_no_gpu_without_gres() -> None:
    runner = Recorder()
    host = SlurmHost("c", runner, SlurmSpec(), slots=range(2))
    request = LaunchRequest(job_id="j", attempt=1, session="eq_p_t_j_a1", attempt_dir="/d/j/a1",
                            cwd=None, cmd="python prep.py", gpus=(), env={}, conda=None,
                            conda_hook=None, launcher="screen")
    await host.launch(request)
    await host.launch(replace(request, gpus=(0, 1)))
    assert runner.calls == [["eq_p_t_j_a1", "/d/j/a1", "--no-requeue"],
                            ["eq_p_t_j_a1", "/d/j/a1", "--gres=gpu:2", "--no-requeue"]]


def test_the_dry_run_plan_places_a_cpu_job_on_no_gpu() -> None:
    manifest = load_manifest_text("hosts: [{name: s, simulate: {gpus: 1}}]\n"
                                  "jobs:\n  - {id: prep, cmd: x, gpus_per_job: 0}\n"
                                  "  - {id: train, cmd: y}\n", "m.yaml")
    assert first_wave(manifest) == {"prep": "s:cpu", "train": "s:0"}


async def test_a_cpu_job_launches_with_no_gpu_visible(tmp_path: Path) -> None:
    engine, host = await started(tmp_path, ["a"])
    added = await engine.command("add", [], {"id": "cpu", "cmd": "prep", "gpus_per_job": 0})
    assert added["ok"], added
    await engine.tick()
    launched = {r.job_id: r for r in host.launches}
    assert launched["cpu"].gpus == () and launched["cpu"].env["CUDA_VISIBLE_DEVICES"] == ""
    assert launched["a"].gpus == (0,)
    engine.ctx.run_dir.release_lock()
