"""`eq-tui init`: brace lists become a grid and a template, hosts a host list; the file loads
with the real loader and passes --dry-run; nothing is ever overwritten; at a terminal with no
flags it asks, offering the aliases of ~/.ssh/config."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eq_tui.cli.init import split_braces
from eq_tui.cli.main import main
from eq_tui.manifest.loader import load_manifest

EQ = [sys.executable, "-m", "eq_tui"]


def test_brace_lists_become_grid_variables_named_after_their_flag() -> None:
    grid = split_braces("python t.py --lr {1e-3,3e-4} --seed={1..3} {a,b} data/{x,y} "
                        "--every {10..0..5} --home ${HOME} $$")
    assert grid.variables == {"lr": ["1e-3", "3e-4"], "seed": ["1", "2", "3"],
                              "v1": ["a", "b"], "v2": ["x", "y"], "every": ["10", "5", "0"]}
    assert grid.template == ("python t.py --lr ${lr} --seed=${seed} ${v1} data/${v2} "
                             "--every ${every} --home $${HOME} $$$$")


def test_init_with_flags_writes_a_manifest_that_loads_and_passes_dry_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sweep.yaml"
    assert main(["init", "--cmd", "sh -c 'echo lr=$0 seed=$1' {1e-3,3e-4} {1..3}",
                 "--hosts", "sim:2,sim", "-o", str(path)]) == 0
    assert f"wrote {path}: 6 job(s) on sim, sim2" in capsys.readouterr().out
    text = path.read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    manifest = load_manifest(path)
    assert [job.id for job in manifest.jobs][:2] == ["v11e-3_v21", "v11e-3_v22"]
    assert manifest.jobs[0].cmd == "sh -c 'echo lr=$0 seed=$1' 1e-3 1"
    assert [(h.name, h.kind) for h in manifest.hosts] == [("sim", "sim"), ("sim2", "sim")]
    dry = subprocess.run([*EQ, str(path), "--dry-run"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "6 jobs" in dry.stdout and "ok   sim: launcher: screen" in dry.stdout


def test_a_fake_train_sweep_marks_its_best_and_any_other_shows_how(tmp_path: Path) -> None:
    fake, own = tmp_path / "fake.yaml", tmp_path / "own.yaml"
    assert main(["init", "--cmd", "fake-train --lr {0.1,0.03}", "--hosts", "sim:2",
                 "-o", str(fake)]) == 0
    assert main(["init", "--cmd", "python train.py --lr {0.1,0.03}", "-o", str(own)]) == 0
    assert load_manifest(fake).results.goal == (("val_acc", "max"),)
    assert not load_manifest(own).results.goal
    assert "# goal: {val_acc: max, loss: min}" in own.read_text()


def test_hosts_become_ssh_local_and_simulated_hosts(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    assert main(["init", "--cmd", "python t.py", "--hosts", "box1, me@10.0.0.7:2222,local,sim:3",
                 "--conda", "env one", "--project", "p1", "-o", str(path)]) == 0
    manifest = load_manifest(path)
    assert [(h.name, h.kind, h.ssh) for h in manifest.hosts] == [
        ("box1", "ssh", "box1"), ("10.0.0.7", "ssh", "me@10.0.0.7:2222"),
        ("local", "local", None), ("sim", "sim", None)]
    assert manifest.conda == "env one" and manifest.project == "p1"
    assert [(j.id, j.cmd) for j in manifest.jobs] == [("run1", "python t.py")]


def test_init_never_overwrites_a_file(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("precious\n")
    assert main(["init", "--cmd", "python t.py", "-o", str(path)]) == 2
    assert "never overwrites" in capsys.readouterr().err
    assert path.read_text() == "precious\n"
    assert main(["init", "--hosts", "a", "-o", str(tmp_path / "x.yaml")]) == 2
    assert not (tmp_path / "x.yaml").exists()


def test_without_flags_and_without_a_terminal_it_says_what_to_give(tmp_path: Path) -> None:
    result = subprocess.run([*EQ, "init", "-o", str(tmp_path / "m.yaml")], capture_output=True,
                            text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 2 and "give --cmd" in result.stderr
    assert "Traceback" not in result.stderr


def _read_until(fd: int, wanted: str, seen: list[str]) -> str:
    deadline = time.monotonic() + 30
    while wanted not in "".join(seen):
        assert time.monotonic() < deadline, f"never saw {wanted!r}; saw {''.join(seen)!r}"
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                seen.append(os.read(fd, 4096).decode(errors="replace"))
            except OSError:
                break
    return "".join(seen)


def test_at_a_terminal_it_asks_and_offers_the_ssh_aliases(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host gpu-a gpu-b\n  HostName 10.0.0.1\n"
                                          "Host *.internal !x\n  User me\n"
                                          "Include extra.conf\n")
    (home / ".ssh" / "extra.conf").write_text("Host gpu-c\n")
    path = tmp_path / "asked.yaml"
    leader, follower = pty.openpty()
    process = subprocess.Popen([*EQ, "init", "-o", str(path)], stdin=follower, stdout=follower,
                               stderr=follower, env={**os.environ, "HOME": str(home)},
                               close_fds=True)
    os.close(follower)
    seen: list[str] = []
    try:
        _read_until(leader, "Command to run", seen)
        os.write(leader, b"python train.py --lr {0.1,0.01}\n")
        screen = _read_until(leader, "Hosts, comma-separated", seen)
        assert "ssh hosts in ~/.ssh/config: gpu-a, gpu-b, gpu-c" in screen
        os.write(leader, b"gpu-a,gpu-c\n")
        _read_until(leader, "Conda env", seen)
        os.write(leader, b"dllm\n")
        _read_until(leader, "wrote", seen)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
    manifest = load_manifest(path)
    assert [job.id for job in manifest.jobs] == ["lr0.1", "lr0.01"]
    assert [h.ssh for h in manifest.hosts] == ["gpu-a", "gpu-c"] and manifest.conda == "dllm"
