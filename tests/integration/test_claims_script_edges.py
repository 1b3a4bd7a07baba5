"""The claims' edges in the host scripts (_claims.sh, _claim_launch.sh), through the real
scripts on this machine: who we are on the host, and which files in the claims directory are
claims at all (a zombie holds nothing, a file that is not a whole claim is none, a claim from a
host without /proc stands while its process does). Real screen sessions, simulated GPUs."""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from eq_tui.hosts.base import LaunchRequest, ProbeRequest
from eq_tui.hosts.claim_types import ClaimTicket, GpuClaim
from eq_tui.hosts.claims import ClaimRefused, want_arg
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.hosts.shell_protocol import script
from eq_tui.sim.state import init_sim_state, sim_bin_dir
from tests.support.polling import wait_until

pytestmark = pytest.mark.integration


def proc_start(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]


@dataclass
class Bed:
    tmp: Path
    env: dict[str, str]
    claims: Path
    started: list[tuple[str, str]] = field(default_factory=list)

    def host(self, **env: str | None) -> ShellHost:
        """The host as an engine run with `env` changed (None: unset) sees it."""
        changed = {k: v for k, v in {**self.env, **env}.items() if v is not None}
        return ShellHost("t", LocalRunner(changed), session_prefix="eqe_")

    async def launch(self, job: str, *, mib: int | None = None, token: str = "t1",
                     gpus: tuple[int, ...] = (0,), known: tuple[str, ...] = (),
                     cmd: str = "sleep 30", **env: str | None) -> None:
        request = LaunchRequest(
            job_id=job, attempt=1, session=f"eqe_{job}_a1",
            attempt_dir=str(self.tmp / "logs" / job / "a1"), cwd=str(self.tmp),
            cmd=cmd, gpus=gpus, env={"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))},
            conda=None, conda_hook=None, launcher="screen",
            claim=ClaimTicket("p", token, mib, known))
        self.started.append((request.session, request.attempt_dir))
        await self.host(**env).launch(request)

    async def claims_now(self) -> tuple[GpuClaim, ...]:
        snap = await self.host().probe(ProbeRequest())
        assert snap.ok, snap.error
        return snap.claims

    def claim_file(self, line: str) -> Path:
        """A file in the claims directory as another user's engine would name a claim."""
        self.claims.mkdir(mode=0o1777, exist_ok=True)
        path = self.claims / "c.0.someone.q.beef01.j.a1"
        path.write_text(line)
        return path


@pytest.fixture
async def bed() -> AsyncIterator[Bed]:
    tmp = Path(tempfile.mkdtemp(prefix="eqce-"))  # short: socket paths stay under 108 bytes
    (tmp / "screen").mkdir(mode=0o700)
    state = init_sim_state(tmp / "sim", host="t", gpus=2, memory_mib=8000)
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "STY")}
    env.update(PATH=f"{sim_bin_dir()}{os.pathsep}{env['PATH']}", EQ_SIM_STATE=str(state),
               SCREENDIR=str(tmp / "screen"), EQ_TUI_CLAIMS=str(tmp / "claims"),
               USER=os.environ.get("USER") or "root")
    bed = Bed(tmp, env, tmp / "claims")
    yield bed
    for session, directory in bed.started:
        await bed.host().kill(session, directory, "screen")
    shutil.rmtree(tmp, ignore_errors=True)


async def test_who_we_are_is_user_then_logname_then_the_account(bed: Bed) -> None:
    """$USER, else $LOGNAME, else `id -un`: the name our claims and want files carry."""
    account = subprocess.run(["id", "-un"], capture_output=True, text=True,
                             check=True).stdout.strip()
    for env, user in (({"USER": "alice", "LOGNAME": "bob"}, "alice"),
                      ({"USER": None, "LOGNAME": "bob"}, "bob"),
                      ({"USER": None, "LOGNAME": None}, account)):
        snap = await bed.host(**env).probe(ProbeRequest(
            want=want_arg("p", "t1", waiting=True, poll_s=1, gpus=None)))
        assert snap.ok and snap.lab is not None, snap.error
        assert snap.lab.user == user
        assert [w.name for w in bed.claims.glob("w.*")] == [f"w.{user}.p.t1"]
        (bed.claims / f"w.{user}.p.t1").unlink()


async def test_a_zombie_holds_no_claim(bed: Bed) -> None:
    zombie = subprocess.Popen(["true"])  # ended, and not reaped until wait()
    try:
        path = Path(f"/proc/{zombie.pid}/stat")
        deadline = time.monotonic() + 10
        while path.read_text().rsplit(") ", 1)[1][0] != "Z":
            assert time.monotonic() < deadline, "the process never became a zombie"
            time.sleep(0.01)
        bed.claim_file(f"eqclaim1 0 someone q beef01 j 1 {zombie.pid} {proc_start(zombie.pid)}"
                       " - eq_q_j_a1\n")
        assert await bed.claims_now() == ()
        await bed.launch("a")  # the GPU alone: no one's claim stands in the way
    finally:
        zombie.wait()


@pytest.mark.parametrize("fields", [
    "eqclaim0 0 someone q beef01 j 1 {pid} {start} - eq_q_j_a1",  # not a claim's tag
    "eqclaim1 0 someone q beef01 j 1 {pid} {start} -",  # half written: no session
    "eqclaim1 0 someone q beef01 j x {pid} {start} - eq_q_j_a1",  # an attempt not a number
    "eqclaim1 0 someone q beef01 j 1 {pid} {start} 12x eq_q_j_a1",  # MiB not a number
])
async def test_a_file_that_is_not_a_whole_claim_claims_nothing(bed: Bed, fields: str) -> None:
    """Held by a live process (this test's), a file in the claims directory that is not a
    whole, well-formed claim line stands in no launch's way."""
    pid = os.getpid()
    bed.claim_file(fields.format(pid=pid, start=proc_start(pid)) + "\n")
    await bed.launch("a")
    assert [(c.user, c.job) for c in await bed.claims_now()] == [(bed.env["USER"], "a")]


async def test_a_claim_from_a_host_without_proc_stands_while_its_process_runs(
        bed: Bed) -> None:
    """A claim whose start time is '-' (written where there is no /proc) is held by its pid
    alone: live while that process runs."""
    alive = subprocess.Popen(["sleep", "60"])
    try:
        bed.claim_file(f"eqclaim1 0 someone q beef01 j 1 {alive.pid} - - eq_q_j_a1\n")
        assert [c.user for c in await bed.claims_now()] == ["someone"]
        with pytest.raises(ClaimRefused, match=r"GPU 0 is claimed by someone's q/j"):
            await bed.launch("a")
    finally:
        alive.kill()
        alive.wait()


def claims_sh(call: str, *args: str) -> None:
    """One of _claims.sh's functions, run by sh as the scripts that include it run it."""
    subprocess.run(["/bin/sh", "-c", f"{script('_claims.sh')}\n{call} \"$@\"", "sh", *args],
                   check=True, capture_output=True, timeout=30)


def test_a_process_drops_only_the_claims_it_holds(bed: Bed) -> None:
    """claims_drop PID FILE...: the launch's trap and the wrapper's end name their claims; one
    another process holds by then (the wrapper took it over) stays, and so does a file that is
    not a claim."""
    bed.claims.mkdir()
    mine, theirs, other = (bed.claims / name for name in ("c.0.u.p.t.a.a1", "c.1.u.p.t.a.a1",
                                                          "c.2.u.p.t.a.a1"))
    mine.write_text("eqclaim1 0 u p t a 1 4242 - - s\n")
    theirs.write_text("eqclaim1 1 u p t a 1 4343 - - s\n")
    other.write_text("not a claim 4242\n")
    claims_sh("claims_drop", "4242", str(mine), str(theirs), str(other))
    assert sorted(p.name for p in bed.claims.iterdir()) == [theirs.name, other.name]


def test_a_claim_is_written_whole_over_what_the_file_held(bed: Bed) -> None:
    path = bed.tmp / ".t.c.0.u.p.t.a.a1"  # a temporary left by a wrapper killed mid-way
    path.write_text("eqclaim1 0 u p t a 1 1 - - old\n")
    claims_sh("claim_write", str(path), "0", "u", "p", "t", "a", "1", "2", "-", "500", "new")
    assert path.read_text() == "eqclaim1 0 u p t a 1 2 - 500 new\n"


async def test_the_hosts_lock_is_every_users_and_a_launch_waits_for_it(bed: Bed) -> None:
    """The first launch makes the claims directory (sticky, every user's) and its lock file,
    readable by every user whatever the launching user's umask; a launch checks and takes its
    claims only while it holds that lock."""
    umask = os.umask(0o077)
    try:
        await bed.launch("a", mib=1000)
    finally:
        os.umask(umask)
    assert (bed.claims.stat().st_mode & 0o7777, (bed.claims / "lock").stat().st_mode & 0o777) \
        == (0o1777, 0o644)
    with (bed.claims / "lock").open() as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another launch, between its check and its claims
        second = asyncio.ensure_future(bed.launch("b", mib=1000))
        try:
            async def blocked() -> bool:
                return lock_waiters(bed.claims, [b"flock"])

            await wait_until(blocked, timeout=20, what="the launch to wait for the lock")
            assert not second.done()
            assert [c.job for c in await bed.claims_now()] == ["a"]
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
        await second
    assert sorted(c.job for c in await bed.claims_now()) == ["a", "b"]


async def test_our_own_claims_count_beside_a_claim_the_engine_did_not_know_of(bed: Bed) -> None:
    """8000 MiB: our job's claim of 2000 and another engine's of 3000, neither allocated yet.
    Placed knowing the other's claim, ours need not be counted (the engine did): 5000 free; a
    claim it did not know of is news, and then ours count beside it: 3000 free."""
    await bed.launch("own", mib=2000)
    await bed.launch("news", mib=3000, token="t2")
    [news] = [c.name for c in await bed.claims_now() if c.job == "news"]
    with pytest.raises(ClaimRefused, match=r"3000 MiB free beside the claims on it; the job "
                                           r"needs 3500 \(claimed since the engine looked\)"):
        await bed.launch("c", mib=3500)
    await bed.launch("c", mib=3500, known=(news,))


async def test_a_claim_holds_what_its_job_has_not_allocated_on_that_gpu(bed: Bed) -> None:
    """A claim of 2000 MiB on GPUs 0 and 1, whose job has allocated 3000 on GPU 0 (more than
    its estimate: nothing more to come) and 1000 on GPU 1 (1000 to come there; what it holds
    on GPU 0 is not GPU 1's)."""
    train = "fake-train --epochs 120 --epoch-seconds 0.5 --mem"
    await bed.launch("a", mib=2000, gpus=(0, 1), cmd=f"CUDA_VISIBLE_DEVICES=0 {train} 3000 & "
                                                     f"CUDA_VISIBLE_DEVICES=1 {train} 1000 & wait")

    async def allocated() -> bool:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used",
                              "--format=csv,noheader,nounits"], env=bed.env,
                             capture_output=True, text=True).stdout.split()
        return [int(used) for used in out] == [3000, 1000]

    await wait_until(allocated, timeout=30, what="a's memory on both GPUs")
    known = tuple(c.name for c in await bed.claims_now())
    with pytest.raises(ClaimRefused, match=r"GPU 0 has 5000 MiB free beside the claims on it"):
        await bed.launch("b", mib=5500, token="t2", gpus=(0,), known=known)
    with pytest.raises(ClaimRefused, match=r"GPU 1 has 6000 MiB free beside the claims on it"):
        await bed.launch("b", mib=6500, token="t2", gpus=(1,), known=known)


def lock_waiters(claims: Path, command: list[bytes]) -> bool:
    """Whether a process running `command` for a launch whose claims directory is `claims`
    is there."""
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[:len(command)] == command and \
                f"EQ_TUI_CLAIMS={claims}".encode() in environ:
            return True
    return False


async def test_without_flock_the_lock_is_a_directory_a_launch_waits_for(bed: Bed) -> None:
    """A host with no flock (not Linux): the lock is the directory lock.d, taken by whoever
    makes it; a launch waits (0.1 s at a time) while another holds it, and leaves none."""
    farm = bed.tmp / "noflock"  # every command of this PATH but flock
    farm.mkdir()
    for directory in bed.env["PATH"].split(os.pathsep)[1:]:
        for tool in Path(directory).glob("*") if Path(directory).is_dir() else ():
            if tool.name != "flock" and not (farm / tool.name).exists():
                (farm / tool.name).symlink_to(tool)
    path = f"{sim_bin_dir()}{os.pathsep}{farm}"
    bed.claims.mkdir(mode=0o1777)
    (bed.claims / "lock.d").mkdir()
    second = asyncio.ensure_future(bed.launch("a", mib=1000, PATH=path))
    try:
        async def waiting() -> bool:
            return lock_waiters(bed.claims, [b"sleep", b"0.1"])

        await wait_until(waiting, timeout=20, what="the launch to wait for lock.d")
        assert not second.done() and await bed.claims_now() == ()
    finally:
        (bed.claims / "lock.d").rmdir()
    await second
    assert [c.job for c in await bed.claims_now()] == ["a"]
    assert not (bed.claims / "lock.d").exists()
