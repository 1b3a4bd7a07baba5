"""Preflight checks each distinct command on the real host (sim hosts: real shell, real PATH):
its first word resolves in the job's environment and the script it runs exists; `venv:` is
activated for the check and for the job."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from eq_tui.cli.main import main
from eq_tui.engine.engine import Engine
from eq_tui.engine.preflight.command_words import command_checks, command_words
from eq_tui.engine.preflight.did_you_mean import closest, did_you_mean
from eq_tui.errors import HostError
from eq_tui.hosts.factory import make_hosts
from eq_tui.manifest.model import EnvVar
from eq_tui.sim.state import sim_bin_dir
from tests.support.engine_run import job, make_manifest, run_to_end

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("cmd", "expected"), [
    ("python train.py --lr 0.1", ("python", "train.py")),
    ("python -u scripts/train.py", ("python", "scripts/train.py")),
    ("python -m pkg.train --x 1", ("python", None)),
    ("bash run.sh ${GPU}", ("bash", "run.sh")),
    ("torchrun --nproc_per_node 2 --master_port=29500 train.py --a b", ("torchrun", "train.py")),
    ("CUDA_LAUNCH_BLOCKING=1 ./train --x", ("./train", None)),
    ("fake-train --epochs 1 && echo done", ("fake-train", None)),
    ("cd sub && python t.py", None),
    ("$HOME/bin/t --x", None),
    ("python $(pick).py", None),
])
def test_command_words(cmd: str, expected: tuple[str, str | None] | None) -> None:
    assert command_words(cmd) == expected


def test_one_check_per_distinct_command() -> None:
    checks = command_checks([job(f"a{i}", f"python train.py --seed {i}") for i in range(3)]
                            + [job("b", "python eval.py")])
    assert [(c.word, c.script, c.jobs) for c in checks] == [
        ("python", "train.py", ("a0", "a1", "a2")), ("python", "eval.py", ("b",))]


async def test_a_missing_command_or_script_fails_preflight_naming_host_jobs_and_word(
        tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('ok')\n")
    manifest = make_manifest(tmp_path, [
        job("typo0", "pythn3 train.py --seed 0"), job("typo1", "pythn3 train.py --seed 1"),
        job("noscript", "python3 trian.py"), job("fine", "python3 train.py")])
    engine = Engine(manifest, tmp_path / "run", make_hosts(manifest, tmp_path / "run"))
    with pytest.raises(HostError) as caught:
        await engine.start()
    message = str(caught.value)
    assert "sim: command: `pythn3` not found" in message and "jobs typo0, typo1" in message
    assert "script trian.py does not exist" in message and "jobs noscript" in message
    assert "fine" not in message
    # refused at preflight: no run state left (only the sim's own GPU state, made before)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["sim"]


def test_the_cli_refuses_a_typo_with_exit_3_and_leaves_no_run_dir(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("project: p\nhosts: [{name: sim, simulate: {gpus: 1}}]\n"
                        "jobs: [{id: a, cmd: 'no-such-trainer --lr 1'}]\n")
    assert main([str(manifest), "--no-ui"]) == 3
    err = capsys.readouterr().err
    assert "`no-such-trainer` not found" in err and "jobs a" in err
    assert "Traceback" not in err
    assert not (tmp_path / "experiment_queue" / "p").exists()


def test_a_typo_of_a_command_on_the_path_gets_a_did_you_mean(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("project: p\nhosts: [{name: sim, simulate: {gpus: 1}}]\n"
                        "jobs: [{id: a, cmd: 'fake-trian --epochs 1'},\n"
                        "       {id: b, cmd: 'zzqqxx --lr 1'}]\n")
    assert main([str(manifest), "--no-ui"]) == 3
    err = capsys.readouterr().err
    # the host's PATH has fake-train (the simulator's): the closest name to the typo
    assert "`fake-trian` not found" in err and "did you mean `fake-train`?" in err
    other = err.split("`zzqqxx` not found", 1)[1].split("jobs b", 1)[0]
    assert "did you mean" not in other  # nothing like it there
    assert main([str(manifest), "--dry-run"]) == 3
    assert "did you mean `fake-train`?" in capsys.readouterr().out


def test_did_you_mean_ranks_the_closest_names() -> None:
    names = ["fake-train", "fake-trainer", "python3", "python3.11", "ls"]
    assert did_you_mean("fake-trian", names) == "; did you mean `fake-train` or `fake-trainer`?"
    assert closest("pythn3", names)[0] == "python3"
    assert did_you_mean("zzqqxx", names) == ""
    assert closest("fake-train", names) == ["fake-trainer"]  # never the word itself


async def test_venv_is_activated_for_the_check_and_for_the_job(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")],
                   check=True, timeout=120)
    tool = tmp_path / "env" / "bin" / "only-in-venv"
    tool.write_text('#!/bin/sh\necho "venv python: $(command -v python)"\n')
    tool.chmod(0o755)
    manifest = make_manifest(tmp_path, [job("a", "only-in-venv")], venv="env")
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 0, run.state["jobs"]
    log = Path(run.job("a")["log"]).read_text()
    assert f"venv python: {tmp_path / 'env' / 'bin' / 'python'}" in log

    without = make_manifest(tmp_path, [job("a", "only-in-venv")])
    engine = Engine(without, tmp_path / "run2", make_hosts(without, tmp_path / "run2"))
    with pytest.raises(HostError, match="`only-in-venv` not found"):
        await engine.start()


@pytest.mark.parametrize("launcher", ["screen", "tmux"])
def test_dry_run_preflight_wording(tmp_path: Path, launcher: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"project: p\nlauncher: {launcher}\nconda: nope\n"
                        f"conda_hook: {tmp_path}/no-hook.sh\n"
                        "hosts: [{name: sim, simulate: {gpus: 1}}]\n"
                        "jobs: [{id: a, cmd: 'echo hi'}]\n")
    assert main([str(manifest), "--dry-run"]) == 3
    out = capsys.readouterr().out
    launcher_line = next(line for line in out.splitlines() if ": launcher: " in line)
    assert "ok   sim: launcher: " in launcher_line
    assert re.search(r"(screen|tmux) (version )?\d+\.\d+", launcher_line.lower())
    assert "Use:" not in out
    assert "FAIL sim: conda: not found (set conda_hook to your conda.sh)" in out
    assert "conda conda" not in out
    assert "project p: 1 job," in out


async def test_the_manifests_env_path_is_the_jobs_path_for_the_check(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    tool = tools / "my-trainer"
    tool.write_text("#!/bin/sh\necho trained\n")
    tool.chmod(0o755)
    env_path = f"{tools}:/usr/local/bin:/usr/bin:/bin"
    manifest = make_manifest(tmp_path, [job("a", "my-trainer --x 1")],
                             env={"PATH": EnvVar(f"{env_path}:{sim_bin_dir()}")})
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 0, run.state["jobs"]
    assert "trained" in Path(run.job("a")["log"]).read_text()


async def test_a_refused_run_never_touches_what_was_in_its_run_dir(tmp_path: Path) -> None:
    run_dir = tmp_path / "mine"
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / "notes.txt").write_text("keep")
    (run_dir / "logs" / "old.log").write_text("keep")
    manifest = make_manifest(tmp_path, [job("a", "no-such-trainer")])
    engine = Engine(manifest, run_dir, make_hosts(manifest, run_dir))
    with pytest.raises(HostError):
        await engine.start()
    assert (run_dir / "notes.txt").read_text() == "keep"
    assert (run_dir / "logs" / "old.log").read_text() == "keep"
    assert not (run_dir / "queue_state.json").exists()
    assert not (run_dir / "events.jsonl").exists()
