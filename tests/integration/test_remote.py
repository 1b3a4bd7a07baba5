"""An engine on a real sshd host: `--detach --on HOST`, then attach, status and stop over SSH
(`HOST:RUN_DIR`), from this machine as root to the login user `eqtest` there."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from eq_tui.api.events import JobUpdated
from eq_tui.cli.remote.link import open_link
from eq_tui.cli.remote.target import RemoteTarget
from tests.support.ground_truth import exits, launches_per_job
from tests.support.secret_search import poll as poll_until
from tests.support.sshbed import USER, SshBed
from tests.support.tmux_attach import needs_tmux, tmux, wait_for_screen

pytestmark = pytest.mark.integration
EQ = [sys.executable, "-m", "eq_tui"]
MANIFEST = """\
project: {project}
hosts: [{{name: sim, simulate: {{gpus: 2, memory_mib: 24576}}}}]
jobs:
  - {{id: job_1, cmd: "{wait}fake-train --epochs {epochs} --epoch-seconds 0.2 --mem 1000 --seed 1"}}
  - {{id: job_2, cmd: "{wait}fake-train --epochs {epochs} --epoch-seconds 0.2 --mem 1000 --seed 2"}}
  - {{id: job_3, cmd: "{wait}fake-train --epochs {epochs} --epoch-seconds 0.2 --mem 1000 --seed 3"}}
  - {{id: job_4, cmd: "{wait}fake-train --epochs {epochs} --epoch-seconds 0.2 --mem 1000 --seed 4"}}
"""


BED_HOSTS = [("gpu", 2, 24576, "Sim RTX"), ("bare", 1, 8192, "Sim")]
BED_WITH_EQ_TUI = ("gpu",)  # "bare" has no eq-tui


@pytest.fixture
def project() -> Iterator[str]:
    name = f"remote_{secrets.token_hex(3)}"
    yield name
    shutil.rmtree(Path(pwd.getpwnam(USER).pw_dir) / ".eq-tui" / "runs" / name,
                  ignore_errors=True)


def remote_run_dir(project: str) -> str:
    return f"{pwd.getpwnam(USER).pw_dir}/.eq-tui/runs/{project}/run"


def sim_state(project: str) -> Path:
    """The simulated host's records on the remote machine (the engine there runs `sim`)."""
    return Path(remote_run_dir(project), "sim", "sim")


def eq(bed: SshBed, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EQ, *args, "--ssh-config", str(bed.ssh_config)],
                          capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL)


def status(bed: SshBed, where: str) -> dict[str, Any]:
    result = eq(bed, "status", where, "--json")
    data: dict[str, Any] = json.loads(result.stdout or "{}")
    # exit 1 exactly when a job needs a person
    assert result.returncode == (1 if data.get("needs_person") else 0), result.stderr
    return data


# each look asks `eq-tui status` over ssh: not too often
poll = partial(poll_until, timeout=120.0, interval=0.3)


def start_on_gpu(bed: SshBed, tmp_path: Path, project: str, epochs: int,
                 gate: Path | None = None) -> str:
    """`gate`: each job waits for that file before it trains."""
    manifest = tmp_path / "sweep.yaml"
    wait = f"while [ ! -e {gate} ]; do sleep 0.2; done; " if gate else ""
    manifest.write_text(MANIFEST.format(project=project, epochs=epochs, wait=wait))
    started = eq(bed, str(manifest), "--detach", "--on", "gpu", "--poll", "0.3")
    assert started.returncode == 0, started.stderr
    where = f"gpu:{remote_run_dir(project)}"
    config = f"--ssh-config {bed.ssh_config}"
    for verb in ("attach", "status", "stop"):
        assert f"eq-tui {verb} {where} {config}" in started.stdout, started.stdout
    return where


def attach_in_tmux(bed: SshBed, tmp_path: Path, where: str) -> str:
    socket = f"eqremote-{secrets.token_hex(3)}"
    command = (f"EQ_TUI_CONFIG_DIR={shlex.quote(str(tmp_path / 'config'))} "
               f"{shlex.quote(sys.executable)} -m eq_tui attach {shlex.quote(where)} "
               f"--ssh-config {shlex.quote(str(bed.ssh_config))}; echo EXIT=$?; sleep 60")
    tmux(socket, "new-session", "-d", "-x", "160", "-y", "48", command)
    return socket


@needs_tmux
def test_detach_on_a_host_attach_over_ssh_cut_the_local_side_and_the_queue_finishes(
        bed: SshBed, tmp_path: Path, project: str) -> None:
    # the jobs run on only once the link is cut: a gate the test opens (a directory the
    # host's login user can read)
    gates = Path(tempfile.mkdtemp(prefix="eqgate-"))
    gates.chmod(0o755)
    gate = gates / "go"
    where = start_on_gpu(bed, tmp_path, project, epochs=3, gate=gate)
    live = status(bed, where)
    assert live["live"] and live["total"] == 4
    socket = attach_in_tmux(bed, tmp_path, where)
    try:
        wait_for_screen(socket, lambda s: "job_1" in s and "job_4" in s and "running" in s)
        # the local side goes away hard: the attach process is killed, its connection cut
        pane_pid = int(tmux(socket, "display-message", "-p", "#{pane_pid}").strip())
        attach_pid = int(subprocess.run(["pgrep", "-P", str(pane_pid)], capture_output=True,
                                        text=True).stdout.split()[0])
        os.kill(attach_pid, signal.SIGKILL)
        wait_for_screen(socket, lambda s: "EXIT=137" in s)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
    bed.cut("gpu")
    gate.touch()
    # the engine on the host keeps scheduling; a later status over ssh sees every job done
    poll(lambda: status(bed, where)["counts"] == {"completed": 4}, "all jobs completed")
    final = eq(bed, "status", where)
    assert "completed   4" in final.stdout
    # from the host: each job's process started once and exited 0 (none relaunched when the
    # local side went away)
    jobs = {f"job_{i}" for i in range(1, 5)}
    assert launches_per_job([sim_state(project)]) == dict.fromkeys(jobs, 1)
    assert exits([sim_state(project)]) == {job: [0] for job in jobs}
    # the headless engine exits once its queue is done; attach says so, offers nothing
    poll(lambda: not status(bed, where)["live"], "the engine to exit")
    late = eq(bed, "attach", where)
    assert late.returncode == 3
    assert f"no engine is running for {where} (its queue has finished: completed 4)" in \
        late.stderr
    assert f"`eq-tui retry {where} JOB... --ssh-config {bed.ssh_config}` runs jobs again" in \
        late.stderr
    # and so it does: a verb on the finished run starts its engine there, for the command
    edited = eq(bed, "edit", where, "job_1", "--set", "seed=9")
    assert (edited.returncode, edited.stdout) == (0, "edit job_1: done\n"), edited.stderr
    assert "started one on gpu in the background for `eq-tui edit`" in edited.stderr
    poll(lambda: (s := status(bed, where))["counts"] == {"completed": 4} and not s["live"],
         "job_1 run again, and its engine gone")
    assert launches_per_job([sim_state(project)])["job_1"] == 2
    # --detach --on again on the finished run: told so plainly, with the queue's exit code
    again = eq(bed, str(tmp_path / "sweep.yaml"), "--detach", "--on", "gpu")
    assert again.returncode == 0, again.stderr
    assert f"the run in {where} has finished (completed 4; exit 0)" in again.stdout
    assert f"eq-tui {tmp_path / 'sweep.yaml'} --fresh --detach --on gpu" in again.stdout


async def test_two_uis_over_ssh_see_one_command_take_effect_once(
        bed: SshBed, tmp_path: Path, project: str) -> None:
    where = await asyncio.to_thread(start_on_gpu, bed, tmp_path, project, 600)
    target = RemoteTarget("gpu", remote_run_dir(project))
    links = [await open_link("gpu", str(bed.ssh_config)) for _ in range(2)]
    try:
        first, second = [await link.control(await link.locate(target)) for link in links]
        assert first is not None and second is not None
        assert {j["id"] for j in first.snapshot()["jobs"]} == {f"job_{i}" for i in range(1, 5)}
        events = first.subscribe()
        deadline = asyncio.get_running_loop().time() + 60
        while not any(j["status"] == "running" and j["id"] == "job_1"
                      for j in first.snapshot()["jobs"]):
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.1)
        assert (await second.command("kill", ["job_1"]))["ok"]
        while True:
            event = await asyncio.wait_for(events.get(), 30)
            if isinstance(event, JobUpdated) and event.job == "job_1" and \
                    event.state["status"] == "killed":
                break
        history = Path(remote_run_dir(project), "events.jsonl").read_text().splitlines()
        kills = [line for line in history if '"new": "killed"' in line
                 and '"job": "job_1"' in line]
        assert len(kills) == 1
        # one UI leaves; the other still commands the engine
        await second.close()
        assert (await first.command("pause"))["ok"]
        # stop from the command line: the remaining UI sees its engine go
        stopped = await asyncio.to_thread(eq, bed, "stop", where)
        assert stopped.returncode == 0, stopped.stderr
        await asyncio.wait_for(first.wait_closed(), 60)
    finally:
        for link in links:
            await link.close()
    # not running, work left: attach says so and prints the exact command that resumes it
    refused = await asyncio.to_thread(eq, bed, "attach", where)
    assert refused.returncode == 3
    resume = f"eq-tui attach {where} --ssh-config {bed.ssh_config} --resume"
    assert "no engine is running for" in refused.stderr and resume in refused.stderr
    assert (await asyncio.to_thread(eq, bed, "stop", where)).returncode == 3
    paused = await asyncio.to_thread(status, bed, where)
    assert not paused["live"] and paused["paused"] and paused["counts"]["killed"] == 1


@needs_tmux
def test_attach_offers_to_resume_a_stopped_engine_and_the_palette_stops_it(
        bed: SshBed, tmp_path: Path, project: str) -> None:
    where = start_on_gpu(bed, tmp_path, project, epochs=600)
    poll(lambda: status(bed, where)["counts"].get("running") == 2, "two running jobs")
    assert eq(bed, "stop", where).returncode == 0
    poll(lambda: not status(bed, where)["live"], "the engine to stop")
    socket = attach_in_tmux(bed, tmp_path, where)
    try:
        wait_for_screen(socket, lambda s: "[y/N]" in s)
        tmux(socket, "send-keys", "y", "Enter")
        # adopted, not relaunched (the hosts' records say so below); at 80 columns the progress
        # column takes the try column's place
        wait_for_screen(socket, lambda s: "job_1" in s and "running" in s)
        tmux(socket, "send-keys", "C-p")
        wait_for_screen(socket, lambda s: "Search for commands" in s or "🔎" in s, 20)
        tmux(socket, "send-keys", "Stop the engine")
        wait_for_screen(socket, lambda s: "asks first" in s, 20)
        tmux(socket, "send-keys", "Enter")
        wait_for_screen(socket, lambda s: "Stop the engine?" in s, 20)
        tmux(socket, "send-keys", "y")
        screen = wait_for_screen(socket, lambda s: "EXIT=" in s)
        assert "EXIT=0" in screen and "stopped the engine of" in screen
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
    after = status(bed, where)
    assert not after["live"] and after["counts"].get("running") == 2  # jobs kept running
    # from the host: the two jobs running before the stop started once, none of them again
    started = launches_per_job([sim_state(project)])
    assert len(started) == 2 and set(started.values()) == {1}, started


def test_a_host_without_eq_tui_is_named_with_the_install_command(bed: SshBed,
                                                                 tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MANIFEST.format(project="never_started", epochs=1, wait=""))
    result = eq(bed, str(manifest), "--detach", "--on", "bare")
    assert result.returncode == 3
    assert "eq-tui is not installed on bare" in result.stderr
    assert (f"ssh -F {bed.ssh_config} bare 'python3 -m pip install --user eq-tui=="
            in result.stderr)
    assert "Traceback" not in result.stderr


def test_remote_run_dirs_that_are_missing_or_not_run_dirs(bed: SshBed) -> None:
    missing = eq(bed, "attach", "gpu:/no/such/dir")
    assert missing.returncode == 3 and "gpu:/no/such/dir: no such directory on gpu" in \
        missing.stderr
    not_a_run = eq(bed, "status", "gpu:/tmp")
    assert not_a_run.returncode == 3 and "no queue_state.json here" in not_a_run.stderr
    unknown = eq(bed, "stop", "nohost:/x")
    assert unknown.returncode == 3 and "read 'nohost:/x' as HOST:RUN_DIR" in unknown.stderr


def test_shell_verbs_over_ssh_and_a_command_resent_after_a_cut_link_is_applied_once(
        bed: SshBed, tmp_path: Path, project: str) -> None:
    from eq_tui.hosts.factory import sim_state_dir
    from eq_tui.sim.state import read_runs

    where = start_on_gpu(bed, tmp_path, project, epochs=600)
    poll(lambda: status(bed, where)["counts"].get("running") == 2, "two jobs running")
    state_file = Path(remote_run_dir(project), "queue_state.json")

    def job_status(job_id: str) -> str | None:
        jobs = json.loads(state_file.read_text())["jobs"]
        return next((j["status"] for j in jobs if j["id"] == job_id), None)

    try:
        held = eq(bed, "hold", where, "job_3", "job_4")
        assert held.returncode == 0 and "hold job_3: done" in held.stdout, held.stderr
        killed = eq(bed, "kill", where, "job_1")
        assert (killed.returncode, killed.stdout) == (0, "kill job_1: done\n"), killed.stderr
        again = eq(bed, "kill", where, "job_1", "--json")
        assert again.returncode == 1
        assert json.loads(again.stdout)["results"] == {"job_1": "already killed"}
        clone = ["clone", where, "job_2", "--id", "job_2b", "--set", "epochs=1",
                 "--command-id", "over-ssh-1"]
        first = eq(bed, *clone)
        assert (first.returncode, first.stdout) == (0, "clone job_2b: done\n"), first.stderr
        bed.cut("gpu")  # every ssh connection drops; the sender cannot tell what arrived
        resent = eq(bed, *clone)
        assert resent.returncode == 0 and "had arrived already" in resent.stdout
        poll(lambda: job_status("job_2b") == "completed", "the clone to complete")
        assert job_status("job_3") == "held"
        missing = eq(bed, "kill", "gpu:/nonexistent/run", "job_1")
        assert missing.returncode == 3, missing.stderr
    finally:
        eq(bed, "stop", where)
    runs = read_runs(sim_state_dir(Path(remote_run_dir(project)), "sim"))
    started = [e["job"] for e in runs if e.get("event") == "start"]
    assert started.count("job_2b") == 1 and "job_3" not in started and "job_4" not in started


async def test_an_attached_client_over_ssh_reconnects_after_a_cut_and_catches_up(
        bed: SshBed, tmp_path: Path, project: str) -> None:
    from eq_tui.api.events import Alert
    from eq_tui.api.reconnecting import ReconnectingClient, Streams

    where = await asyncio.to_thread(start_on_gpu, bed, tmp_path, project, 600)
    target = RemoteTarget("gpu", remote_run_dir(project))
    link = await open_link("gpu", str(bed.ssh_config))

    async def connect() -> Streams | None:
        return await link.streams(await link.locate(target))

    client = await ReconnectingClient.open(connect, where=where,
                                           pauses=(0.2, 0.5, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0))
    assert client is not None
    events = client.subscribe()
    try:
        bed.cut("gpu")
        while True:
            event = await asyncio.wait_for(events.get(), 60)
            if isinstance(event, Alert) and "reconnecting" in event.message:
                break
        killed = await asyncio.to_thread(eq, bed, "kill", where, "job_4")  # meanwhile
        assert killed.returncode == 0, killed.stderr
        while True:
            event = await asyncio.wait_for(events.get(), 60)
            if isinstance(event, JobUpdated) and event.job == "job_4" and \
                    event.state["status"] == "killed":
                break
        assert client.reconnects >= 1
        assert (await client.command("hold", ["job_3"]))["ok"]  # the link works again
    finally:
        await client.close()
        await link.close()
        await asyncio.to_thread(eq, bed, "stop", where)
