"""launch.sh's own edges, run as the engine runs it (`sh -c SCRIPT`) on this machine: the exit
code of each way it refuses to start anything, and its claim arguments' short form. Real screen
sessions, simulated GPUs."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from eq_tui.hosts.base import LaunchRequest
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.hosts.shell_protocol import launch_stdin, script
from eq_tui.sim.state import init_sim_state, sim_bin_dir
from tests.support.polling import wait_until

pytestmark = pytest.mark.integration


@dataclass
class Bed:
    tmp: Path
    env: dict[str, str]

    def request(self, job: str, cmd: str = "true") -> LaunchRequest:
        return LaunchRequest(job_id=job, attempt=1, session=f"eqls_{job}_a1",
                             attempt_dir=str(self.tmp / "logs" / job / "a1"), cwd=str(self.tmp),
                             cmd=cmd, gpus=(0,), env={"CUDA_VISIBLE_DEVICES": "0"}, conda=None,
                             conda_hook=None, launcher="screen")

    def launch(self, request: LaunchRequest, *args: str, launcher: str = "screen",
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["/bin/sh", "-c", script("launch.sh"), "launch.sh", launcher, request.session,
             request.attempt_dir, *args], input=launch_stdin(request).decode(),
            capture_output=True, text=True, env=env or self.env, timeout=60)


@pytest.fixture
def bed() -> Iterator[Bed]:
    tmp = Path(tempfile.mkdtemp(prefix="eqls-"))  # short: screen's socket path stays short
    (tmp / "screen").mkdir(mode=0o700)
    state = init_sim_state(tmp / "sim", host="l", gpus=1, memory_mib=8000)
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "STY")}
    env.update(PATH=f"{sim_bin_dir()}{os.pathsep}{env['PATH']}", EQ_SIM_STATE=str(state),
               SCREENDIR=str(tmp / "screen"), EQ_TUI_CLAIMS=str(tmp / "claims"))
    yield Bed(tmp, env)
    subprocess.run(["screen", "-wipe"], env=env, capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


def test_a_launcher_that_is_not_installed_or_not_known_exits_4_or_2(bed: Bed) -> None:
    tools = bed.tmp / "tools"  # what launch.sh runs before it looks for its launcher, no screen
    tools.mkdir()
    for name in ("mkdir", "dirname"):
        found = shutil.which(name)
        assert found is not None
        (tools / name).symlink_to(found)
    done = bed.launch(bed.request("nolauncher"), env=dict(bed.env, PATH=str(tools)))
    assert (done.returncode, done.stderr) == (4, "eq-tui: screen is not installed on this "
                                                 "host\n")
    done = bed.launch(bed.request("unknown"), launcher="byobu")
    assert (done.returncode, done.stderr) == (2, "eq-tui: unknown launcher byobu\n")


def test_the_claim_arguments_without_the_rules_ones_still_take_the_claim(bed: Bed) -> None:
    """launch.sh's short form: the claim arguments with no RULES, RULES_SUM, MAX_GPUS (eleven
    in all) claim the GPU like the long one."""
    request = bed.request("short", "sleep 30")
    claims = bed.tmp / "claims"
    try:
        done = bed.launch(request, str(claims), "p", "t1", "short", "1", "0", "-", "-")
        assert done.returncode == 0, done.stderr
        [claim] = claims.glob("c.*")
        assert claim.name.startswith("c.0.") and claim.name.endswith(".p.t1.short.a1")
    finally:
        subprocess.run(["screen", "-S", request.session, "-X", "quit"], env=bed.env,
                       capture_output=True)


async def test_a_virtualenv_is_activated_before_the_command_or_its_absence_said(
        bed: Bed) -> None:
    venv = bed.tmp / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text("EQ_TEST_VENV=on; export EQ_TEST_VENV\n")
    host = ShellHost("l", LocalRunner(bed.env), session_prefix="eqls_")
    for job, where in (("venv", venv), ("novenv", bed.tmp / "missing")):
        request = replace(bed.request(job, 'echo "venv: ${EQ_TEST_VENV:-off}"'), venv=str(where))
        await host.launch(request)
        done = Path(request.attempt_dir) / "exit"

        async def ended(done: Path = done) -> bool:
            return done.exists()

        await wait_until(ended, what=f"{job}'s exit record")
    logs = {job: (bed.tmp / "logs" / job / "a1" / "log").read_text()
            for job in ("venv", "novenv")}
    assert "venv: on" in logs["venv"]
    assert f"virtualenv {bed.tmp / 'missing'} has no bin/activate" in logs["novenv"]
    assert "venv:" not in logs["novenv"]


async def test_a_command_file_with_nothing_in_it_fails_the_attempt_in_its_log(
        bed: Bed) -> None:
    request = bed.request("empty", "")
    await ShellHost("l", LocalRunner(bed.env), session_prefix="eqls_").launch(request)
    done = Path(request.attempt_dir) / "exit"

    async def ended() -> bool:
        return done.exists()

    await wait_until(ended, what="the attempt's exit record")
    assert done.read_text().strip() != "0"
    assert f"cannot read the command from {request.attempt_dir}/cmd" in (
        Path(request.attempt_dir) / "log").read_text()


@pytest.mark.parametrize(("launcher", "tries"), [("screen", 1), ("tmux", 3)])
def test_a_session_that_does_not_start_is_tried_again_only_under_tmux(
        bed: Bed, launcher: str, tries: int) -> None:
    """A tmux server that is exiting drops a new client: launch.sh starts the session again,
    three times in all, while none exists. screen is asked once. Then exit 6."""
    broken = bed.tmp / "broken"
    broken.mkdir()
    calls = bed.tmp / "calls"
    (broken / launcher).write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\nexit 1\n")
    (broken / launcher).chmod(0o755)
    request = bed.request(f"never{launcher}")
    done = bed.launch(request, launcher=launcher,
                      env=dict(bed.env, PATH=f"{broken}:{bed.env['PATH']}"))
    assert done.returncode == 6
    assert f"{launcher} could not start session {request.session} (exit 1)" in done.stderr
    starts = [line for line in calls.read_text().splitlines()
              if "-dmS" in line or "new-session" in line]
    assert len(starts) == tries, calls.read_text()


def test_a_wrapper_slow_to_start_in_a_live_session_is_waited_for(bed: Bed) -> None:
    """The watchdog fails a launch whose session ended before its wrapper started, not one
    whose wrapper is slow to start in a session that runs (here its shell takes 2.5 s)."""
    slow = bed.tmp / "slow"
    slow.mkdir()
    (slow / "sh").write_text("#!/bin/sh\nsleep 2.5\nexec /bin/sh \"$@\"\n")
    (slow / "sh").chmod(0o755)
    request = bed.request("slow", f"date > {bed.tmp / 'started'}")
    done = bed.launch(request, env=dict(bed.env, PATH=f"{slow}:{bed.env['PATH']}"))
    assert (done.returncode, done.stderr) == (0, "")
    assert not (Path(request.attempt_dir) / ".launch-failed").exists()


def test_a_session_whose_wrapper_never_starts_fails_the_launch_in_20_s(bed: Bed) -> None:
    """A session that runs but never starts the wrapper (its shell hangs): the watchdog gives
    up after 20 s with exit 7 and says why; the attempt's environment is never handed over."""
    stuck = bed.tmp / "stuck"
    stuck.mkdir()
    (stuck / "sh").write_text("#!/bin/sh\nexec sleep 120\n")
    (stuck / "sh").chmod(0o755)
    request = bed.request("stuck")
    try:
        done = bed.launch(request, env=dict(bed.env, PATH=f"{stuck}:{bed.env['PATH']}"))
    finally:
        subprocess.run(["screen", "-S", request.session, "-X", "quit"], env=bed.env,
                       capture_output=True)
    assert done.returncode == 7  # (the writer it ended says "Terminated" first)
    assert done.stderr.endswith(
        f"\neq-tui: session {request.session} did not start its wrapper within 20 s\n")
    assert not (Path(request.attempt_dir) / "env.fifo").exists()


def test_a_launch_with_no_drain_and_no_claims_never_reads_the_gpus(bed: Bed) -> None:
    """nvidia-smi runs in a launch only for a drain wait or the claims' checks (the
    simulator's record of who asked)."""
    calls = bed.tmp / "calls"
    request = bed.request("plain")
    done = bed.launch(request, env=dict(bed.env, EQ_SIM_CALLS=str(calls)))
    assert done.returncode == 0, done.stderr
    assert not calls.exists()


async def test_a_screen_job_gets_the_session_screen_gives_it_not_the_launchs_terminal(
        bed: Bed) -> None:
    """The launch's own environment is handed over again only under tmux (whose server's is
    not the launch's); a screen session is started from the launch's already, and what screen
    sets itself (TERM) stays screen's."""
    host = ShellHost("l", LocalRunner(dict(bed.env, TERM="eq-launch-term")),
                     session_prefix="eqls_")
    request = bed.request("term", 'echo "term: $TERM"')
    await host.launch(request)
    done = Path(request.attempt_dir) / "exit"

    async def ended() -> bool:
        return done.exists()

    await wait_until(ended, what="the attempt's exit record")
    log = (Path(request.attempt_dir) / "log").read_text()
    assert "term: screen" in log and "eq-launch-term" not in log
