"""A stop that lets the job save its work (issue 47): the job gets its signal and its grace while
its wrapper and session stay up, never a SIGHUP; SIGKILL only once the grace has run out; the
exit record says how it ended. A real job (tests/support/saving_job.py: 2 s to save on SIGTERM,
every signal it gets written down) on screen, tmux, an sshd host and Slurm: 20 of 20 kills
saved, each launcher's jobs started and killed side by side."""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eq_tui.hosts.base import (
    PERSON_STOP,
    Host,
    LauncherName,
    LaunchRequest,
    ProbeRequest,
    Stop,
)
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.hosts.slurm import SlurmHost
from eq_tui.hosts.ssh import SshRunner
from eq_tui.manifest.model import SlurmSpec
from tests.support.polling import wait_until
from tests.support.slurmbed import SharedSlurm, SlurmBed, slurm_available
from tests.support.sshbed import USER, SshBed

pytestmark = pytest.mark.integration

BED_HOSTS = [("gamma", 1, 24576, "Sim")]
JOB = Path(__file__).resolve().parents[1] / "support" / "saving_job.py"
KILLS = 20  # per launcher: the job saved in each one
REASON = "killed by the user"


@dataclass
class Stopped:
    """One job's kill: what the host answered and what the job and its records say."""

    name: str
    code: int | None
    seconds: float
    where: Path
    attempt: Path

    def signals(self) -> list[str]:
        path = self.where / f"{self.name}.signals"
        return path.read_text().split() if path.exists() else []

    def saved(self) -> bool:
        return (self.where / f"{self.name}.saved").exists()

    def exit_record(self) -> list[str]:
        return (self.attempt / "exit").read_text().splitlines()


def requests(where: Path, logs: Path, prefix: str, names: list[str], launcher: LauncherName,
             python: str, mode: str, job: Path = JOB) -> list[LaunchRequest]:
    return [LaunchRequest(job_id=name, attempt=1, session=f"{prefix}{name}_a1",
                          attempt_dir=str(logs / name / "a1"), cwd=str(where),
                          cmd=f"{python} {job} {where} {name} {mode}", gpus=(),
                          env={"PATH": os.environ["PATH"]}, conda=None, conda_hook=None,
                          launcher=launcher)
            for name in names]


async def launch_and_kill(host: Host, where: Path, batch: list[LaunchRequest],
                          stop: Stop = PERSON_STOP, timeout: float = 60) -> list[Stopped]:
    """Launch the batch, wait until each job has its handlers in, kill them all at once."""
    await asyncio.gather(*(host.launch(request) for request in batch))

    async def ready() -> bool:
        return all((where / f"{r.job_id}.ready").exists() for r in batch)

    await wait_until(ready, timeout, "every job's handlers")

    async def kill(request: LaunchRequest) -> Stopped:
        began = time.monotonic()
        code = (await host.kill(request.session, request.attempt_dir, request.launcher,
                                REASON, stop)).code
        return Stopped(request.job_id, code, time.monotonic() - began, where,
                       Path(request.attempt_dir))

    return list(await asyncio.gather(*(kill(request) for request in batch)))


def assert_saved(stopped: list[Stopped]) -> None:
    """Every job saved its work, saw SIGTERM once and nothing else, and says it ended well."""
    assert [s.name for s in stopped if not s.saved()] == []
    assert {s.name: s.signals() for s in stopped if s.signals() != ["SIGTERM"]} == {}
    for one in stopped:
        record = one.exit_record()
        assert record == ["0", "stop TERM", "signal TERM", "grace 5", "grace_ran_out 0"], one
        assert one.code in (0, None)  # Slurm's host leaves the record to its probe


def assert_killed_after_grace(stopped: list[Stopped], grace: float,
                              signals: tuple[str, ...] = ("SIGTERM",)) -> None:
    """A job that ignores SIGTERM is SIGKILLed once the grace has run out, not before."""
    for one in stopped:
        assert tuple(one.signals()) == signals and not one.saved()
        assert one.exit_record() == ["137", "stop TERM", "signal KILL", f"grace {grace:g}",
                                     "grace_ran_out 1"], one
        assert one.seconds >= grace


# ---- screen and tmux on this machine ---------------------------------------------------------

@pytest.fixture
def local_env() -> Iterator[dict[str, str]]:
    sockets = Path(tempfile.mkdtemp(prefix="eqgs-"))  # short: socket paths < 108 bytes
    for name in ("screen", "tmux"):
        (sockets / name).mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "STY")}
    env["SCREENDIR"] = str(sockets / "screen")
    env["TMUX_TMPDIR"] = str(sockets / "tmux")
    yield env
    for socket in (["-L", "eq-tui"], []):
        os.spawnvpe(os.P_WAIT, "tmux", ["tmux", *socket, "kill-server"],
                    {**env, "TMUX": ""})
    shutil.rmtree(sockets, ignore_errors=True)


def local_host(tmp_path: Path, env: dict[str, str]) -> ShellHost:
    return ShellHost("t", LocalRunner(env), log_dir=str(tmp_path / "logs"),
                     session_prefix="eqgs_")


@pytest.mark.parametrize("launcher", ["screen", "tmux"])
async def test_every_kill_lets_the_job_save_and_no_hangup_reaches_it(
        tmp_path: Path, local_env: dict[str, str], launcher: LauncherName) -> None:
    host = local_host(tmp_path, local_env)
    names = [f"s{n}" for n in range(KILLS)]
    batch = requests(tmp_path, tmp_path / "logs", "eqgs_", names, launcher, sys.executable,
                     "save")
    stopped = await launch_and_kill(host, tmp_path, batch)
    assert_saved(stopped)
    log = (tmp_path / "logs" / "s0" / "a1" / "log").read_text().splitlines()
    assert "saving checkpoint" in log  # its output still reached the log after the signal
    assert log[-1].startswith(f"eq-tui: {REASON} (SIGTERM to the job, which ended within the "
                              "5 s grace;")
    snap = await host.probe(ProbeRequest())
    assert snap.ok and not snap.sessions, f"sessions left behind: {sorted(snap.sessions)}"


@pytest.mark.parametrize("launcher", ["screen", "tmux"])
async def test_a_job_that_ignores_sigterm_is_sigkilled_after_the_grace(
        tmp_path: Path, local_env: dict[str, str], launcher: LauncherName) -> None:
    host = local_host(tmp_path, local_env)
    batch = requests(tmp_path, tmp_path / "logs", "eqgs_", ["i0", "i1"], launcher,
                     sys.executable, "ignore")
    stopped = await launch_and_kill(host, tmp_path, batch, Stop(grace_s=1.5))
    assert_killed_after_grace(stopped, 1.5)
    assert [s.code for s in stopped] == [137, 137]
    log = (tmp_path / "logs" / "i0" / "a1" / "log").read_text().rstrip().splitlines()
    assert log[-1].startswith("eq-tui: killed by the user (SIGTERM to the job, SIGKILL after "
                              "the 1.5 s grace;")


@pytest.mark.parametrize("launcher", ["screen", "tmux"])
async def test_a_job_without_a_handler_is_gone_at_once_whatever_the_grace(
        tmp_path: Path, local_env: dict[str, str], launcher: LauncherName) -> None:
    """The grace is not waited once the job is gone: its GPU is freed as fast as before."""
    host = local_host(tmp_path, local_env)
    request = requests(tmp_path, tmp_path / "logs", "eqgs_", ["plain"], launcher, "", "")[0]
    request = LaunchRequest(**{**request.__dict__, "cmd": "echo up; sleep 300"})
    await host.launch(request)

    async def up() -> bool:
        log = Path(request.attempt_dir) / "log"
        return log.exists() and "up" in log.read_text()

    await wait_until(up, 20, "the job to start")
    began = time.monotonic()
    stopped = await host.kill(request.session, request.attempt_dir, launcher, REASON,
                              Stop(grace_s=60))
    assert time.monotonic() - began < 5
    assert stopped.code == 143  # the shell running `sleep` ended with it, by SIGTERM
    # when, by the host's own records: the ends the engine records for the attempt
    records = Path(request.attempt_dir)
    assert (stopped.started_at, stopped.ended_at) == (
        float((records / "start").read_text()), float((records / "end").read_text()))
    assert (Path(request.attempt_dir) / "exit").read_text().splitlines()[1:] == [
        "stop TERM", "signal TERM", "grace 60", "grace_ran_out 0"]


@pytest.mark.parametrize("screen_or_tmux", ["screen", "tmux"])
async def test_a_stop_left_by_an_ended_engine_sends_no_second_signal_and_keeps_its_grace(
        tmp_path: Path, local_env: dict[str, str], screen_or_tmux: LauncherName) -> None:
    """An engine that ends during a grace leaves the stop's record on the host (its signal
    already sent); the next engine stops the job again: no second signal reaches the job,
    and its grace counts from the first stop's record, not from the second stop."""
    host = local_host(tmp_path, local_env)
    batch = requests(tmp_path, tmp_path / "logs", "eqgs_", ["late", "over"], screen_or_tmux,
                     sys.executable, "ignore")
    await asyncio.gather(*(host.launch(request) for request in batch))

    async def ready() -> bool:
        return all((tmp_path / f"{r.job_id}.ready").exists() for r in batch)

    await wait_until(ready, 60, "every job's handlers")
    # the first stops' records, as kill.sh writes them before its signal: 3 s ago for `late`
    # (of a 6 s grace, 3 s are left), 10 s ago for `over` (its grace ran out meanwhile)
    for request, ago in zip(batch, (3, 10), strict=True):
        record = Path(request.attempt_dir) / "stop"
        record.write_text("stop TERM\nsignal TERM\ngrace 6\ngrace_ran_out 0\n")
        os.utime(record, (time.time() - ago, time.time() - ago))

    async def kill(request: LaunchRequest) -> float:
        began = time.monotonic()
        await host.kill(request.session, request.attempt_dir, request.launcher, REASON,
                        Stop(grace_s=6))
        return time.monotonic() - began

    late, over = await asyncio.gather(*(kill(request) for request in batch))
    for request in batch:
        assert not (tmp_path / f"{request.job_id}.signals").exists(), "a second SIGTERM"
        assert (Path(request.attempt_dir) / "exit").read_text().splitlines() == [
            "137", "stop TERM", "signal KILL", "grace 6", "grace_ran_out 1"]
        log = (Path(request.attempt_dir) / "log").read_text().rstrip().splitlines()
        assert log[-1].startswith(f"eq-tui: {REASON} (SIGTERM sent by an earlier stop, "
                                  "SIGKILL once its 6 s grace ran out;"), log[-1]
    # the rest of the grace, to the second of the record's time: 2-3 s, not 6
    assert 1.5 <= late < 5.5, late
    assert over < 2.5, over


# ---- an sshd host ----------------------------------------------------------------------------

async def test_over_ssh_every_kill_lets_the_job_save(bed: SshBed, bed_work: Path) -> None:
    job = bed_work / "saving_job.py"
    shutil.copy(JOB, job)
    shutil.chown(job, USER, USER)
    runner = SshRunner("gamma", "gamma", config_path=str(bed.ssh_config), connect_timeout=5)
    host = ShellHost("gamma", runner, log_dir=str(bed_work / "logs"), session_prefix="eqgs_")
    try:
        names = [f"r{n}" for n in range(KILLS)]
        batch = [LaunchRequest(**{**r.__dict__, "env": {}})
                 for r in requests(bed_work, bed_work / "logs", "eqgs_", names, "screen",
                                   "python3", "save", job)]
        stopped = await launch_and_kill(host, bed_work, batch)
        assert_saved(stopped)
        ignoring = [LaunchRequest(**{**r.__dict__, "env": {}})
                    for r in requests(bed_work, bed_work / "logs", "eqgs_", ["ri"], "tmux",
                                      "python3", "ignore", job)]
        assert_killed_after_grace(await launch_and_kill(host, bed_work, ignoring,
                                                        Stop(grace_s=1)), 1)
    finally:
        await runner.close()


# ---- Slurm -----------------------------------------------------------------------------------

needs_slurm = pytest.mark.skipif(not slurm_available(),
                                 reason="slurmctld/slurmd/munge not installed (.ci/setup)")
SLURM_LOCK = Path("/tmp/eq-tui-slurm.tests.lock")  # test_slurm.py's: the cluster to one test


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmBed]:
    with SharedSlurm() as bed:
        yield bed


@needs_slurm
async def test_on_slurm_every_kill_lets_the_job_save(slurm: SlurmBed, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    host = SlurmHost("c", LocalRunner(), SlurmSpec(partition="gpu", mem="200M"),
                     slots=range(4))
    logs = tmp_path / "logs"
    with open(SLURM_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stopped: list[Stopped] = []
        for wave in range(2):  # the node runs 16 jobs at once: two waves of ten
            names = [f"w{wave}j{n}" for n in range(KILLS // 2)]
            batch = requests(tmp_path, logs, f"eq_gs_{os.getpid()}_", names, "screen",
                             sys.executable, "save")
            stopped += await launch_and_kill(host, tmp_path, batch, timeout=120)
        assert len(stopped) == KILLS
        assert_saved(stopped)
        batch = requests(tmp_path, logs, f"eq_gs_{os.getpid()}_", ["ign"], "screen",
                         sys.executable, "ignore")
        ignoring = await launch_and_kill(host, tmp_path, batch, Stop(grace_s=1), timeout=120)
        job_id = (ignoring[0].attempt / "slurm_job_id").read_text().strip()

        async def gone() -> bool:
            out = slurm.run("squeue", "-h", "-t", "R,CG", "-j", job_id, "-o", "%T",
                            check=False)
            return out.strip() == ""

        await wait_until(gone, 10, "the job's SIGKILL after KillWait")
        # after the grace, Slurm's cancel: SIGTERM again, SIGKILL after KillWait (2 s here)
        assert_killed_after_grace(ignoring, 1, signals=("SIGTERM", "SIGTERM"))
