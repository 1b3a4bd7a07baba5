"""The shell-script host on this machine: real screen and tmux, simulated GPUs."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from eq_tui.errors import HostError
from eq_tui.hosts.base import AttemptRef, LaunchRequest, PathCheck, ProbeRequest
from eq_tui.hosts.local import LocalRunner, make_sim_host, sim_environment
from eq_tui.hosts.logclean import clean_text
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.sim.state import init_sim_state

pytestmark = pytest.mark.integration


@pytest.fixture
async def sim(tmp_path: Path):  # type: ignore[no-untyped-def]
    state = init_sim_state(tmp_path / "sim", host="h", gpus=2, memory_mib=8000)
    host = make_sim_host("h", str(state), str(tmp_path / "logs"))
    started: list[tuple[str, str, str]] = []
    yield host, tmp_path, started
    for launcher, session, directory in started:
        await host.kill(session, directory, launcher)  # type: ignore[arg-type]


def request(tmp: Path, job: str, cmd: str, *, launcher: str = "screen", attempt: int = 1,
            env: dict[str, str] | None = None, token: str | None = None) -> LaunchRequest:
    token = token or secrets.token_hex(3)
    return LaunchRequest(job_id=job, attempt=attempt, session=f"eq_t_{token}_{job}_a{attempt}",
                         attempt_dir=str(tmp / "logs" / job / f"a{attempt}"), cwd=str(tmp),
                         cmd=cmd, gpus=(0,), env={"CUDA_VISIBLE_DEVICES": "0", **(env or {})},
                         conda=None, conda_hook=None, launcher=launcher)  # type: ignore[arg-type]


async def launch(host: ShellHost, started: list[tuple[str, str, str]],
                 req: LaunchRequest) -> AttemptRef:
    await host.launch(req)
    started.append((req.launcher, req.session, req.attempt_dir))
    return AttemptRef(req.job_id, req.session, req.attempt_dir, None)


async def until_exited(host: ShellHost, ref: AttemptRef, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        snap = await host.probe(ProbeRequest(attempts=(ref,)))
        assert snap.ok, snap.error
        probe = snap.attempts[ref.key]
        if probe.exit_code is not None and not probe.session_alive:
            return snap, probe
        assert asyncio.get_running_loop().time() < deadline, probe
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("launcher", ["screen", "tmux"])
async def test_real_exit_code_env_and_fresh_attempt_dir(sim, launcher: str) -> None:  # type: ignore[no-untyped-def]
    host, tmp, started = sim
    req = request(tmp, "j", 'echo "dev=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER '
                  'unbuf=$PYTHONUNBUFFERED"; exit 3', launcher=launcher,
                  env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PYTHONUNBUFFERED": "1"})
    ref = await launch(host, started, req)
    _snap, probe = await until_exited(host, ref)
    assert probe.exit_code == 3  # the command's own code, not tee's
    assert "dev=0 order=PCI_BUS_ID unbuf=1" in probe.log_tail
    assert probe.started is not None and probe.pid is not None
    assert {p.name for p in Path(req.attempt_dir).iterdir()} >= {"log", "pid", "pgid", "start",
                                                                "exit", "cmd", "run.sh"}
    # an attempt directory is never launched into twice
    with pytest.raises(HostError, match="already exists"):
        await host.launch(req)


@pytest.mark.parametrize("launcher", ["screen", "tmux"])
async def test_a_wrapper_that_gives_up_before_the_command_records_both_ends(  # type: ignore[no-untyped-def]
        sim, launcher: str) -> None:
    host, tmp, started = sim
    req = replace(request(tmp, "nowhere", "true", launcher=launcher), cwd=str(tmp / "absent"))
    ref = await launch(host, started, req)
    _snap, probe = await until_exited(host, ref)
    assert probe.exit_code == 2 and "does not exist" in probe.log_tail
    assert probe.started is not None and probe.exited_at is not None
    assert probe.exited_at >= probe.started


async def test_values_with_shell_metacharacters_arrive_verbatim(sim) -> None:  # type: ignore[no-untyped-def]
    host, tmp, started = sim
    nasty = {"A": "; touch pwned", "B": "$(touch pwned2)", "C": "`touch pwned3`",
             "D": "it's \"quoted\"", "E": "two\nlines", "F": "$HOME ${PATH}"}
    script = "; ".join(f'printf "%s|" "${name}"' for name in nasty)
    ref = await launch(host, started, request(tmp, "q", script, env=nasty))
    _snap, probe = await until_exited(host, ref)
    assert probe.exit_code == 0
    assert probe.log_tail.strip() == "|".join(nasty.values()) + "|"
    assert not list(tmp.glob("pwned*")) and not list(Path.cwd().glob("pwned*"))


async def test_a_secret_is_never_on_disk_nor_on_a_command_line(sim) -> None:  # type: ignore[no-untyped-def]
    host, tmp, started = sim
    secret = f"s3cret-{secrets.token_hex(8)}"
    req = request(tmp, "sec", 'test -n "$TOKEN" && sleep 30', env={"TOKEN": secret})
    ref = await launch(host, started, req)
    snap = await host.probe(ProbeRequest(attempts=(ref,)))
    assert snap.attempts["sec"].session_alive
    for path in tmp.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert secret not in ps


async def test_kill_addresses_the_session_exactly(sim) -> None:  # type: ignore[no-untyped-def]
    host, tmp, started = sim
    token = secrets.token_hex(3)
    short = await launch(host, started, request(tmp, "s1", "sleep 60", token=token))
    longer = await launch(host, started, request(tmp, "s10", "sleep 60", token=token))
    assert longer.session.startswith(short.session[:-3])  # `..._s1` is a prefix of `..._s10`
    await host.kill(short.session, short.attempt_dir, "screen")
    snap = await host.probe(ProbeRequest(attempts=(short, longer)))
    assert not snap.attempts["s1"].session_alive and not snap.attempts["s1"].pid_alive
    assert snap.attempts["s10"].session_alive and snap.attempts["s10"].pid_alive


async def test_stale_session_is_visible_then_cleaned(sim) -> None:  # type: ignore[no-untyped-def]
    host, tmp, started = sim
    ref = await launch(host, started, request(tmp, "st", "(sleep 60 &) ; exit 0"))
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        snap = await host.probe(ProbeRequest(attempts=(ref,)))
        probe = snap.attempts["st"]
        if probe.exit_code is not None:
            break
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    assert probe.exit_code == 0 and probe.session_alive  # exited, session held by the child
    await host.kill(ref.session, ref.attempt_dir, "screen")
    snap = await host.probe(ProbeRequest(attempts=(ref,)))
    assert not snap.attempts["st"].session_alive


async def test_output_checks_and_preconditions_are_globs(sim) -> None:  # type: ignore[no-untyped-def]
    host, tmp, _started = sim
    (tmp / "out").mkdir()
    (tmp / "out" / "a 1.json").write_text("{}")
    snap = await host.probe(ProbeRequest(
        output_checks=(PathCheck("a", "out/a 1.json"), PathCheck("b", "out/b*.json"),
                       PathCheck("star", "out/*.json")),
        preconditions=(PathCheck("p", str(tmp / "out" / "*.json")),
                       PathCheck("inj", "$(touch pwned4)")), cwd=str(tmp)))
    assert snap.output_checks == {"a": True, "b": False, "star": True}
    assert snap.preconditions == {"p": True, "inj": False}
    assert not (tmp / "pwned4").exists()


@pytest.mark.parametrize(("smi", "warning"), [
    ("echo '0, GPU-x, Tesla, [N/A], 16000, [Not Supported]'", "memory.used is '[N/A]'"),
    ("true", "listed no GPUs"),
    ("echo garbage", "unexpected line"),
    ("echo 'NVIDIA-SMI has failed'; exit 9", "nvidia-smi failed (exit 9)"),
])
async def test_odd_nvidia_smi_output_gives_warnings_not_errors(tmp_path: Path, smi: str,
                                                                warning: str) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text(
        f"#!/bin/sh\ncase \"$*\" in *compute-apps*) exit 0;; esac\n{smi}\n")
    (fake / "nvidia-smi").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    host = ShellHost("odd", LocalRunner(env), log_dir=str(tmp_path / "logs"))
    snap = await host.probe(ProbeRequest())
    assert snap.ok
    assert any(warning in w for w in snap.warnings), snap.warnings
    assert all(g.memory_used_mib is None for g in snap.gpus)


async def test_probe_reports_only_the_attempts_it_is_asked_about(sim) -> None:  # type: ignore[no-untyped-def]
    host, tmp, started = sim
    refs = [await launch(host, started, request(tmp, f"f{i}", "true")) for i in range(5)]
    for ref in refs:
        await until_exited(host, ref)
    snap = await host.probe(ProbeRequest(attempts=(refs[0],)))
    assert list(snap.attempts) == ["f0"]
    assert sim_environment(str(tmp / "sim"))["SCREENDIR"] != os.environ.get("SCREENDIR")


async def test_tail_cleans_ansi_and_progress_bars(sim) -> None:  # type: ignore[no-untyped-def]
    host, tmp, started = sim
    ref = await launch(host, started, request(
        tmp, "bar", r"printf '\033[32mgreen\033[0m\n10%%\r50%%\r100%%\nlast\n'"))
    await until_exited(host, ref)
    assert await host.tail(ref.attempt_dir, 3) == ["green", "100%", "last"]
    assert clean_text(b"caf\xe9\n") == ["caf\ufffd"]


async def test_a_launch_request_cut_off_on_the_way_never_launches(sim) -> None:  # type: ignore[no-untyped-def]
    from eq_tui.hosts.shell_protocol import script

    host, tmp, _started = sim
    full = b"1\nexport A=1\nfake-train --epochs 1\nEQ_LAUNCH_END\n"
    for cut in (0, 3, 14, len(full) - 5, len(full) - 1):
        directory = tmp / "logs" / "cut" / f"a{cut}"
        result = await host.runner.run(script("launch.sh"),
                                       ["screen", f"eq_t_cut_{cut}", str(directory)],
                                       stdin=full[:cut])
        assert result.returncode == 9, (cut, result.stderr)
        assert b"cut off" in result.stderr and not directory.exists()
    snap = await host.probe(ProbeRequest())
    assert not [s for s in snap.sessions if s.startswith("eq_t_cut_")]


async def test_a_working_directory_with_shell_metacharacters_is_only_a_path(sim) -> None:  # type: ignore[no-untyped-def]
    host, tmp, started = sim
    nasty = tmp / "d; touch pwned5 $(touch pwned6) `touch pwned7` 'q'"
    nasty.mkdir()
    req = request(tmp, "cwdjob", "pwd > where.txt")
    req = LaunchRequest(**{**req.__dict__, "cwd": str(nasty)})
    ref = await launch(host, started, req)
    _snap, probe = await until_exited(host, ref)
    assert probe.exit_code == 0
    assert (nasty / "where.txt").read_text().strip() == str(nasty)
    assert not list(tmp.rglob("pwned*")) and not list(Path.cwd().glob("pwned*"))
