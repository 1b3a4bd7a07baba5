"""A job that can never fit is told before it waits: `--dry-run` and the start of a run refuse
a job whose `mem_mib` no allowed GPU holds, or whose `gpus_per_job` no host has (exit 3, a FAIL
line with both figures, nothing launched). Through the real CLI on simulated hosts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eq_tui.cli.main import main
from eq_tui.engine.engine import Engine
from eq_tui.engine.preflight.fit import allowed_only, misfits
from eq_tui.errors import UnfitJobError
from eq_tui.hosts.factory import make_hosts, sim_state_dir
from eq_tui.manifest.model import JobSpec
from eq_tui.sim.state import init_sim_state, read_runs, sim_bin_dir
from tests.support.engine_run import job, make_manifest

pytestmark = pytest.mark.integration
# box2 is a real host to the manifest (`gpus: all`, how many unknown until it is probed) whose
# nvidia-smi is the simulated one: 4 GPUs of 24 GiB
HOSTS = "hosts: [{name: sim, simulate: {gpus: 2}}, {name: box2}]\n"
BIG = "FAIL job big: mem_mib 30000 but the largest GPU has 24576 MiB (sim, box2)"
WIDE = "FAIL job wide: gpus_per_job 8 but the most GPUs on one host is 4"


@pytest.fixture(autouse=True)
def box2_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = init_sim_state(tmp_path / "box2-gpus", host="box2", gpus=4, memory_mib=24576)
    monkeypatch.setenv("EQ_SIM_STATE", str(state))
    monkeypatch.setenv("PATH", f"{sim_bin_dir()}{os.pathsep}{os.environ['PATH']}")


def write(tmp_path: Path, jobs: str, hosts: str = HOSTS) -> Path:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"project: p\n{hosts}jobs:\n{jobs}")
    return manifest


UNFIT = ("  - {id: big, cmd: 'fake-train --mem 30000', mem_mib: 30000}\n"
         "  - {id: wide, cmd: 'fake-train --mem 100', gpus_per_job: 8}\n"
         "  - {id: fine, cmd: 'fake-train --mem 4000', mem_mib: 4000, gpus_per_job: 4}\n")


def test_dry_run_fails_a_job_no_gpu_or_host_can_give_what_it_asks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(write(tmp_path, UNFIT)), "--dry-run"]) == 3
    out = capsys.readouterr().out
    assert f"  {BIG}" in out.splitlines()
    assert f"  {WIDE}" in out.splitlines()
    assert "job fine" not in out
    assert "FAIL sim" not in out and "FAIL box2" not in out


def test_a_run_is_refused_with_exit_3_before_anything_launches(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(write(tmp_path, UNFIT)), "--no-ui"]) == 3
    err = capsys.readouterr().err
    assert BIG in err and WIDE in err and "job fine" not in err
    assert "Traceback" not in err
    assert not (tmp_path / "experiment_queue" / "p").exists()


async def test_the_engine_launches_nothing_when_it_refuses(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("big", "fake-train --mem 30000", mem_mib=30000),
                                        job("ok", "fake-train --mem 100")])
    run_dir = tmp_path / "run"
    engine = Engine(manifest, run_dir, make_hosts(manifest, run_dir))
    with pytest.raises(UnfitJobError, match="mem_mib 30000 but the largest GPU has 24576 MiB"):
        await engine.start()
    assert read_runs(sim_state_dir(run_dir, "sim")) == []
    assert not (run_dir / "queue_state.json").exists()


def test_the_margin_shared_gpus_keep_free_counts_and_a_job_alone_needs_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs = ("  - {id: tight, cmd: 'fake-train --mem 24000 --seed 1', mem_mib: 24000}\n"
            "  - {id: alone, cmd: 'fake-train --mem 24000 --seed 2', mem_mib: 24000, "
            "exclusive: true}\n")
    assert main([str(write(tmp_path, jobs)), "--dry-run"]) == 3
    out = capsys.readouterr().out
    assert ("  FAIL job tight: mem_mib 24000 but the largest GPU has 24576 MiB (sim, box2), "
            "23552 MiB once gpu_margin_mib 1024 is kept free") in out.splitlines()
    assert "job alone" not in out


def test_a_host_whose_gpus_are_not_known_fails_no_job(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = "  - {id: big, cmd: 'fake-train --mem 30000', mem_mib: 30000}\n"
    gone = ("hosts: [{name: sim, simulate: {gpus: 2}}, "
            "{name: gone, ssh: 'nobody@127.0.0.1:1'}]\n")
    assert main([str(write(tmp_path, big, gone)), "--dry-run"]) == 3
    out = capsys.readouterr().out
    assert "FAIL gone: connection" in out  # the exit code's reason, not the job
    assert "FAIL job" not in out  # the unreachable host may have GPUs large enough
    alone = "hosts: [{name: sim, simulate: {gpus: 2}}]\n"
    assert main([str(write(tmp_path, big, alone)), "--dry-run"]) == 3
    assert ("  FAIL job big: mem_mib 30000 but the largest GPU has 24576 MiB (sim)"
            in capsys.readouterr().out.splitlines())


def test_a_gpu_off_the_allow_list_gives_no_room() -> None:
    totals = allowed_only({"h1": {0: 24576, 1: 81920}, "h2": {0: 24576}},
                          {"h1": frozenset({0}), "h2": None})
    assert totals == {"h1": {0: 24576}, "h2": {0: 24576}}
    big = JobSpec(id="big", phase="main", cmd="x", mem_mib=30000)
    assert [m.line for m in misfits([big], totals, 1024)] == [
        "FAIL job big: mem_mib 30000 but the largest GPU has 24576 MiB (h1, h2)"]


def test_the_pure_check() -> None:
    specs = [JobSpec(id="a", phase="main", cmd="x", mem_mib=30000, gpus_per_job=2),
             JobSpec(id="auto", phase="main", cmd="x", mem_mib="auto", gpus_per_job=2),
             JobSpec(id="cpu", phase="main", cmd="x", gpus_per_job=0)]
    one_large = {"h1": {0: 81920, 1: 24576}, "h2": {0: 24576}}
    assert [(m.job, m.detail) for m in misfits(specs, one_large, 1024)] == [
        ("a", "mem_mib 30000 on each of 2 GPUs but no host has 2 GPUs that large")]
    assert misfits(specs, {"h1": {0: 81920, 1: 81920}}, 1024) == []
    assert misfits(specs, {**one_large, "unknown": None}, 1024) == []
