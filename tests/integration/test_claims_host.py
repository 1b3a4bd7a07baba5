"""GPU claims on a host, through the real scripts: real screen and tmux sessions, simulated GPUs,
several engines (here: several run tokens) launching on one host. What launch.sh refuses, what
the probe reports, and when a claim is void: its process gone (a launch cut off, a job killed),
or another process under its pid (a reboot)."""

from __future__ import annotations

import asyncio
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from eq_tui.errors import HostError
from eq_tui.hosts.base import LauncherName, LaunchRequest, ProbeRequest
from eq_tui.hosts.claims import (
    ClaimRefused,
    ClaimTicket,
    GpuClaim,
    WaitingNeed,
    launch_args,
    others,
    pending_by_gpu,
    usage_of,
    want_arg,
)
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.hosts.shell_protocol import launch_stdin, script
from eq_tui.sim.state import (
    find_overlaps,
    init_sim_state,
    read_runs,
    run_intervals,
    sim_bin_dir,
)
from tests.support.polling import wait_until

pytestmark = pytest.mark.integration
USER = os.environ.get("USER") or os.environ.get("LOGNAME") or "root"


def proc_start(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]


@dataclass
class Bed:
    host: ShellHost
    tmp: Path
    env: dict[str, str]
    claims: Path
    started: list[tuple[LauncherName, str, str]] = field(default_factory=list)

    def request(self, job: str, token: str, *, gpus: tuple[int, ...] = (0,),
                mib: int | None = None, known: tuple[str, ...] = (), cmd: str = "sleep 30",
                launcher: LauncherName = "screen", cwd: str | None = None) -> LaunchRequest:
        return LaunchRequest(
            job_id=job, attempt=1, session=f"eqc_{token}_{job}_a1",
            attempt_dir=str(self.tmp / "logs" / token / job / "a1"),
            cwd=cwd or str(self.tmp), cmd=cmd, gpus=gpus,
            env={"CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))}, conda=None,
            conda_hook=None, launcher=launcher, claim=ClaimTicket("p", token, mib, known))

    async def launch(self, request: LaunchRequest) -> None:
        self.started.append((request.launcher, request.session, request.attempt_dir))
        await self.host.launch(request)

    async def claims_now(self) -> tuple[GpuClaim, ...]:
        snap = await self.host.probe(ProbeRequest())
        assert snap.ok, snap.error
        return snap.claims

    def fake_claim(self, gpu: int, pid: int, pstart: str, *, who: str = "someone",
                   mib: str = "-") -> Path:
        """A claim another user's engine left (written as they would)."""
        path = self.claims / f"c.{gpu}.{who}.q.beef01.j.a1"
        path.write_text(f"eqclaim1 {gpu} {who} q beef01 j 1 {pid} {pstart} {mib} eq_q_j_a1\n")
        return path


@pytest.fixture
async def bed() -> AsyncIterator[Bed]:
    tmp = Path(tempfile.mkdtemp(prefix="eqcl-"))  # short: socket paths stay under 108 bytes
    for name in ("screen", "tmux"):
        (tmp / name).mkdir(mode=0o700)
    state = init_sim_state(tmp / "sim", host="t", gpus=2, memory_mib=8000)
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "STY")}
    env.update(PATH=f"{sim_bin_dir()}{os.pathsep}{env['PATH']}", EQ_SIM_STATE=str(state),
               SCREENDIR=str(tmp / "screen"), TMUX_TMPDIR=str(tmp / "tmux"),
               EQ_TUI_CLAIMS=str(tmp / "claims"))
    bed = Bed(ShellHost("t", LocalRunner(env), session_prefix="eqc_"), tmp, env, tmp / "claims")
    yield bed
    for launcher, session, directory in bed.started:
        await bed.host.kill(session, directory, launcher)
    subprocess.run(["tmux", "-L", "eq-tui", "kill-server"], env=env, capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("launcher", ["screen", "tmux"])
async def test_a_gpu_claimed_by_another_engine_is_refused_and_nothing_starts(
        bed: Bed, launcher: LauncherName) -> None:
    await bed.launch(bed.request("a", "t1", launcher=launcher))
    claims = await bed.claims_now()
    assert [(c.gpu, c.user, c.project, c.token, c.job, c.attempt, c.mib) for c in claims] == [
        (0, USER, "p", "t1", "a", 1, None)]
    assert (bed.claims.stat().st_mode & 0o7777) == 0o1777  # sticky, for every user
    # the claim is the wrapper's (it leads the job's group), not the launch's, long gone
    pgid = int((bed.tmp / "logs" / "t1" / "a" / "a1" / "pgid").read_text())
    assert claims[0].pid == pgid
    with pytest.raises(ClaimRefused, match=r"GPU 0 is claimed by .*'s p/a"):
        await bed.launch(bed.request("b", "t2", launcher=launcher))
    assert not (bed.tmp / "logs" / "t2" / "b" / "a1").exists()  # nothing made, nothing left
    assert len(await bed.claims_now()) == 1
    await bed.launch(bed.request("b", "t2", gpus=(1,), launcher=launcher))
    # our own claims never stop us: the engine keeps its own jobs apart
    await bed.launch(bed.request("c", "t1", gpus=(0,), mib=1000, launcher=launcher))
    assert {(c.gpu, c.job) for c in await bed.claims_now()} == {(0, "a"), (1, "b"), (0, "c")}


async def test_a_shared_gpu_takes_memory_that_fits_beside_every_claim_on_it(
        bed: Bed) -> None:
    late = "sleep 3; fake-train --mem 3000 --epochs 20 --epoch-seconds 1"
    await bed.launch(bed.request("a", "t1", gpus=(1,), mib=3000, cmd=late))
    # a claim the engine did not know of when it placed the job: it fits beside it all the same
    await bed.launch(bed.request("b", "t2", gpus=(1,), mib=3000))
    [a] = [c.name for c in await bed.claims_now() if c.job == "a"]
    # 8000 MiB, two claims of 3000 not allocated yet: 2000 left (b is news to this engine)
    with pytest.raises(ClaimRefused, match=r"2000 MiB free beside the claims on it; the job "
                                           r"needs 3000 \(claimed since the engine looked\)"):
        await bed.launch(bed.request("c", "t3", gpus=(1,), mib=3000, known=(a,)))
    known = tuple(c.name for c in await bed.claims_now())
    with pytest.raises(ClaimRefused, match=r"needs 3000$"):
        await bed.launch(bed.request("c", "t3", gpus=(1,), mib=3000, known=known))
    # a job that wants the GPU alone never gets one another engine shares
    with pytest.raises(ClaimRefused, match="GPU 1 is claimed by"):
        await bed.launch(bed.request("d", "t3", gpus=(1,), known=known))

    async def allocated() -> bool:  # once a's memory shows, its claim holds nothing more
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used",
                              "--format=csv,noheader,nounits"], env=bed.env,
                             capture_output=True, text=True).stdout.split()
        return int(out[1]) >= 3000

    await wait_until(allocated, timeout=15, what="a's memory")
    with pytest.raises(ClaimRefused, match="2000 MiB free"):
        await bed.launch(bed.request("c", "t3", gpus=(1,), mib=3000, known=known))
    await bed.launch(bed.request("c", "t3", gpus=(1,), mib=2000, known=known))


async def test_a_claim_whose_process_is_gone_or_replaced_is_void(bed: Bed) -> None:
    bed.claims.mkdir(mode=0o1777)
    gone = subprocess.Popen(["true"])
    gone.wait()
    bed.fake_claim(0, gone.pid, "-", who="someone")
    # a reboot: the pid is alive again, but it is another process (it started at another time)
    alive = subprocess.Popen(["sleep", "60"])
    try:
        bed.fake_claim(1, alive.pid, str(int(proc_start(alive.pid)) + 1), who="other")
        assert await bed.claims_now() == ()
        await bed.launch(bed.request("a", "t1", gpus=(0, 1)))
        # and one still held by its own process stands
        bed.fake_claim(1, alive.pid, proc_start(alive.pid), who="third")
        assert sorted(c.user for c in await bed.claims_now() if c.gpu == 1) == sorted(
            [USER, "third"])
    finally:
        alive.kill()
        alive.wait()


async def test_our_own_void_claims_are_cleared_by_the_probe_and_a_kill(bed: Bed) -> None:
    await bed.launch(bed.request("a", "t1"))
    attempt = str(bed.tmp / "logs" / "t1" / "a" / "a1")
    await bed.host.kill("eqc_t1_a_a1", attempt, "screen")
    assert not list(bed.claims.glob("c.*"))  # the kill took its claim with it
    bed.fake_claim(1, 2 ** 22 + 12345, "-", who=USER)  # one of ours, its process gone
    assert await bed.claims_now() == ()
    assert not list(bed.claims.glob("c.*"))


async def test_a_job_that_fails_to_start_leaves_no_claim(bed: Bed) -> None:
    # its wrapper fails (no working directory): it drops its claims as it ends
    await bed.launch(bed.request("nocwd", "t1", cwd=str(bed.tmp / "gone"), cmd="true"))

    async def dropped() -> bool:
        return not list(bed.claims.glob("c.*"))

    await wait_until(dropped, what="the failed job's claim to go")
    # its session never starts: the launch fails and takes its claims back
    broken = bed.tmp / "broken"
    broken.mkdir()
    (broken / "screen").write_text("#!/bin/sh\ncase \" $* \" in *\" -dmS \"*) exit 0;; esac\n"
                                   "exit 1\n")
    (broken / "screen").chmod(0o755)
    host = ShellHost("t", LocalRunner(dict(bed.env, PATH=f"{broken}:{bed.env['PATH']}")),
                     session_prefix="eqc_")
    with pytest.raises(HostError, match="ended before its wrapper started"):
        await host.launch(bed.request("never", "t1", cmd="true"))
    assert not list(bed.claims.glob("c.*"))
    assert await bed.claims_now() == ()


async def test_a_launch_cut_off_mid_way_leaves_a_void_claim(bed: Bed) -> None:
    """The engine (or its connection) died while a launch waited for its session: the claim
    names the launch's process, gone with it."""
    broken = bed.tmp / "broken"
    broken.mkdir()
    (broken / "screen").write_text("#!/bin/sh\nsleep 30\n")  # hangs: the engine gives up
    (broken / "screen").chmod(0o755)
    runner = LocalRunner(dict(bed.env, PATH=f"{broken}:{bed.env['PATH']}"))
    request = bed.request("cut", "t1", cmd="true")
    args = [request.launcher, request.session, request.attempt_dir,
            *launch_args(request.claim, None, request.job_id, request.attempt, request.gpus)]
    with pytest.raises(HostError, match="longer than"):
        await runner.run(script("launch.sh"), args, stdin=launch_stdin(request), timeout=3)
    assert len(list(bed.claims.glob("c.*"))) == 1  # left behind, by a process that is gone
    assert await bed.claims_now() == ()
    await bed.launch(bed.request("next", f"t{secrets.token_hex(2)}"))


async def test_a_freed_gpu_is_the_turn_of_a_waiting_engine_that_holds_fewer(bed: Bed) -> None:
    """Fair turns: an engine that waits here (its probe says so) and holds fewer GPUs than the
    launching one gets the GPU first; for a while only, and only one it may use."""

    async def wants(token: str, waiting: bool, gpus: tuple[int, ...] | None = None) -> None:
        snap = await bed.host.probe(ProbeRequest(want=want_arg(
            "p", token, waiting=waiting, poll_s=1, gpus=gpus)))
        assert snap.ok, snap.error

    await wants("t2", True)
    want_file = bed.claims / f"w.{USER}.p.t2"
    assert want_file.read_text().split() == ["eqwant1", USER, "p", "t2", "1", "all", "-", "-",
                                             "-"]
    await bed.launch(bed.request("a", "t1", gpus=(0,)))  # neither holds any: no one's turn
    with pytest.raises(ClaimRefused, match=r"fair turn: .*'s p holds 0 MiB of GPU memory here, "
                                           r"waits and could use GPU 1; we hold 8000 MiB"):
        await bed.launch(bed.request("b", "t1", gpus=(1,)))
    assert not (bed.tmp / "logs" / "t1" / "b" / "a1").exists()
    # its turn lasts 3 of its polls + 10 s: then the GPU is not kept idle for it
    marker = bed.claims / f"y.{USER}.p.t1"
    past = time.time() - 14
    os.utime(marker, (past, past))
    await bed.launch(bed.request("b", "t1", gpus=(1,)))
    assert not marker.exists()
    await bed.host.kill("eqc_t1_b_a1", str(bed.tmp / "logs" / "t1" / "b" / "a1"), "screen")
    # an engine that may not use the GPU, or that no longer waits, or whose want is stale,
    # has no turn
    await wants("t2", True, gpus=(0,))
    await bed.launch(bed.request("c", "t1", gpus=(1,)))
    await bed.host.kill("eqc_t1_c_a1", str(bed.tmp / "logs" / "t1" / "c" / "a1"), "screen")
    await wants("t2", True)
    past = time.time() - 60
    os.utime(want_file, (past, past))
    await bed.launch(bed.request("d", "t1", gpus=(1,)))
    await bed.host.kill("eqc_t1_d_a1", str(bed.tmp / "logs" / "t1" / "d" / "a1"), "screen")
    await wants("t2", False)
    assert not want_file.exists()
    await bed.launch(bed.request("e", "t1", gpus=(1,)))


async def test_a_host_closed_while_its_engine_waits_takes_the_want_back(bed: Bed) -> None:
    """An engine that ends while its jobs wait (a queue killed, a person's quit) takes its want
    file back as it closes the host, so no other engine yields a freed GPU to an engine that is
    gone (a want goes stale only 3 of its polls + 10 s later). One that no longer waits has
    nothing to take back; another engine's want is left alone."""
    other = ShellHost("t", LocalRunner(bed.env), session_prefix="eqc_")
    ending = ShellHost("t", LocalRunner(bed.env), session_prefix="eqc_")
    for host, token in ((other, "t7"), (ending, "t8")):
        snap = await host.probe(ProbeRequest(want=want_arg("p", token, waiting=True, poll_s=1,
                                                           gpus=None)))
        assert snap.ok, snap.error
    assert {path.name for path in bed.claims.glob("w.*")} == {f"w.{USER}.p.t7",
                                                              f"w.{USER}.p.t8"}
    await ending.close()
    assert {path.name for path in bed.claims.glob("w.*")} == {f"w.{USER}.p.t7"}
    # waiting, then not: the probe took it back already; closing writes nothing again
    snap = await other.probe(ProbeRequest(want=want_arg("p", "t7", waiting=False, poll_s=1,
                                                        gpus=None)))
    assert snap.ok, snap.error
    assert list(bed.claims.glob("w.*")) == []
    (bed.claims / f"w.{USER}.p.t7").write_text("eqwant1 stand-in\n")  # not ours to remove now
    await other.close()
    assert (bed.claims / f"w.{USER}.p.t7").exists()


async def wants_as(bed: Bed, token: str, need: WaitingNeed | None,
                   gpus: tuple[int, ...] | None = None) -> None:
    """Engine `token`'s probe: it waits here, with jobs that need `need`."""
    snap = await bed.host.probe(ProbeRequest(want=want_arg(
        "p", token, waiting=True, poll_s=1, gpus=gpus, need=need)))
    assert snap.ok, snap.error


async def test_a_turn_is_only_for_a_waiting_engine_that_could_use_the_gpu(bed: Bed) -> None:
    """The want file says what the waiting engine's jobs need: one whose jobs are too big for
    the GPU, need more GPUs than the launch takes, or may not use it holds nothing back (the
    launch goes at once, not after its turn runs out)."""
    await bed.launch(bed.request("a", "t1", gpus=(0,)))  # t1 holds GPU 0: 8000 MiB
    cannot = [(WaitingNeed(share_mib=9000), None),  # more than the 8000 MiB GPU has
              (WaitingNeed(count=2, alone_below_mib=500), None),  # two GPUs; the launch frees one
              (WaitingNeed(alone_below_mib=500), (0,))]  # it may not use GPU 1
    for i, (need, gpus) in enumerate(cannot):
        await wants_as(bed, "t2", need, gpus)
        await bed.launch(bed.request(f"b{i}", "t1", gpus=(1,)))
        assert (bed.tmp / "logs" / "t1" / f"b{i}" / "a1" / "pgid").exists()
        await bed.host.kill(f"eqc_t1_b{i}_a1", str(bed.tmp / "logs" / "t1" / f"b{i}" / "a1"),
                            "screen")
    for i, need in enumerate((WaitingNeed(share_mib=3000), WaitingNeed(alone_below_mib=500))):
        await wants_as(bed, "t2", need)
        with pytest.raises(ClaimRefused, match=r"fair turn: .* could use GPU 1"):
            await bed.launch(bed.request(f"c{i}", "t1", gpus=(1,)))


async def test_a_turn_goes_by_gpu_memory_held_and_covers_room_on_a_shared_gpu(bed: Bed) -> None:
    """Freed room on a GPU that jobs share is the turn of a waiting engine that holds less of
    the host's GPU memory (not fewer jobs) and whose jobs fit the room."""
    await bed.launch(bed.request("a", "t1", gpus=(0,), mib=3000))
    await bed.launch(bed.request("b", "t1", gpus=(0,), mib=3000))
    # t2: two jobs, 1000 MiB in all; t1 will hold one job of 3000 once a ends
    for job in ("x", "y"):
        await bed.launch(bed.request(job, "t2", gpus=(1,), mib=500))
    await bed.host.kill("eqc_t1_a_a1", str(bed.tmp / "logs" / "t1" / "a" / "a1"), "screen")
    await wants_as(bed, "t2", WaitingNeed(share_mib=4000))  # fits the 5000 MiB a left
    with pytest.raises(ClaimRefused, match=r"fair turn: .* holds 1000 MiB of GPU memory here, "
                                           r"waits and could use GPU 0; we hold 3000 MiB"):
        await bed.launch(bed.request("c", "t1", gpus=(0,), mib=3000))
    # jobs too big for what the GPU would have for them, were our jobs there done (8000 MiB
    # less another engine's 4000): no turn
    await bed.launch(bed.request("z", "t3", gpus=(0,), mib=4000))
    await wants_as(bed, "t2", WaitingNeed(share_mib=4500))
    await bed.launch(bed.request("c", "t1", gpus=(0,), mib=1000))
    # an engine that holds fewer jobs (t3: one) but no less memory (4000 MiB each) has no turn
    (bed.claims / f"w.{USER}.p.t2").unlink()
    await wants_as(bed, "t3", WaitingNeed(share_mib=500))
    await bed.launch(bed.request("d", "t1", gpus=(1,), mib=500))


async def test_the_labs_rules_are_rechecked_under_the_lock(bed: Bed) -> None:
    """A rules file changed between the engine's probe and its launch, or a user at
    max_gpus_per_user (by all their engines' claims) while another user waits: the launch is
    refused like a claim (nothing started, nothing claimed) and placed again by the rules."""
    rules = bed.tmp / "rules.yaml"
    rules.write_text("prefer: [1, 0]\n")
    host = ShellHost("t", LocalRunner(bed.env), session_prefix="eqc_", rules=str(rules))

    async def looked() -> str:
        snap = await host.probe(ProbeRequest())
        assert snap.ok and snap.lab is not None and snap.lab.rules is not None, snap.error
        return snap.lab.checksum

    def request(job: str, token: str, gpu: int, checksum: str,
                most: int | None = None) -> LaunchRequest:
        plain = bed.request(job, token, gpus=(gpu,))
        bed.started.append((plain.launcher, plain.session, plain.attempt_dir))
        return replace(plain, claim=replace(plain.claim, rules_sum=checksum, max_gpus=most))

    first = await looked()
    await host.launch(request("a", "t1", 0, first))
    rules.write_text("keep_free: [1]\n")  # GPU 1, free, is kept free from now on
    with pytest.raises(ClaimRefused, match=r"the lab's rules \(.*rules.yaml\) changed since "
                                           r"the engine looked"):
        await host.launch(request("b", "t2", 1, first))
    assert not (bed.tmp / "logs" / "t2" / "b" / "a1").exists()
    assert [c.job for c in await bed.claims_now()] == ["a"]
    with pytest.raises(ClaimRefused, match="changed since"):  # a file that was not there
        await host.launch(request("b", "t2", 1, "-"))
    rules.write_text("max_gpus_per_user: 1\n")
    now = await looked()
    # another user's engine waits here (its want file, as it writes it)
    other = bed.claims / "w.someone.q.beef01"
    other.write_text("eqwant1 someone q beef01 1 all 1 - 500\n")
    with pytest.raises(ClaimRefused, match=rf"allow 1 GPU\(s\) per user while others wait "
                                           rf"\(someone\); {USER} would hold 2"):
        await host.launch(request("b", "t2", 1, now, most=1))
    assert not (bed.tmp / "logs" / "t2" / "b" / "a1").exists()
    other.unlink()  # no one else waits: the limit does not apply
    await host.launch(request("b", "t2", 1, now, most=1))


async def test_a_job_in_its_own_process_group_is_its_claims_usage_by_its_session(
        bed: Bed) -> None:
    """A job that leaves its wrapper's process group (a launcher's workers, `os.setpgrp()`)
    stays in the wrapper's session, and the claim (the wrapper's) counts its memory by that:
    its group and its session differ here, and each is told apart. What the job has allocated
    is then not counted again as claimed and still to come: another engine's job fits beside
    it, to the MiB, in the engine's reading and in the launch's own."""
    train = ["fake-train", "--mem", "3000", "--epochs", "60", "--epoch-seconds", "1"]
    own_group = (f"{shlex.quote(sys.executable)} -c 'import os, sys; os.setpgid(0, 0); "
                 f"os.execvp(sys.argv[1], sys.argv[1:])' {shlex.join(train)}")
    await bed.launch(bed.request("a", "t1", gpus=(1,), mib=3000, cmd=own_group))

    async def allocated() -> bool:
        snap = await bed.host.probe(ProbeRequest())
        return any(g.index == 1 and (g.memory_used_mib or 0) >= 3000 for g in snap.gpus)

    await wait_until(allocated, timeout=15, what="a's memory")
    snap = await bed.host.probe(ProbeRequest())
    [claim] = snap.claims
    uuid = next(g.uuid for g in snap.gpus if g.index == 1)
    [process] = [p for p in snap.processes if p.gpu_uuid == uuid]
    assert process.sid == claim.pid != process.pgid
    assert usage_of(claim, snap.gpus, snap.processes) == 3000
    assert pending_by_gpu(others(snap.claims, "p", "t2"), snap.gpus, snap.processes) == {1: 0}
    # 8000 MiB, 3000 used by a, nothing of a's claim still to come: 5000 free for b
    with pytest.raises(ClaimRefused, match="5000 MiB free beside the claims on it"):
        await bed.launch(bed.request("b", "t2", gpus=(1,), mib=5001, known=(claim.name,)))
    await bed.launch(bed.request("b", "t2", gpus=(1,), mib=5000, known=(claim.name,)))


RACING = "fake-train --mem 1000 --epochs 600 --epoch-seconds 0.1"


async def test_sharing_launches_racing_another_engines_whole_gpu_claim_never_double_book(
        bed: Bed) -> None:
    """One engine launches a job that wants GPU 0 whole while two other engines launch jobs
    that would share it, all at once and none knowing of the others' claims. Under the host's
    lock either the whole-GPU job goes alone, or the sharing jobs go and it is refused: never
    both. Judged from the host's own records: its claims after each round, and the simulated
    GPU's record of when each job ran on it (no whole-GPU job ever beside another)."""

    def racer(job: str, token: str, mib: int | None) -> LaunchRequest:
        plain = bed.request(job, token, gpus=(0,), mib=mib, cmd=RACING)
        return replace(plain, env={**plain.env, "EQ_JOB_ID": job})

    def started(job: str) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return any(r["event"] == "start" and r.get("job") == job for r in read_runs(state))
        return check

    state = Path(bed.env["EQ_SIM_STATE"])
    # a fourth engine waits here, for GPU 1 only (no turn of GPU 0 for it): each launch reads
    # the GPUs under the lock for the fair turns, between its check and its claims
    await wants_as(bed, "t9", WaitingNeed(alone_below_mib=500), gpus=(1,))
    # in turn first: a GPU another engine holds whole is no job's to share
    await bed.launch(racer("whole", "t1", None))
    with pytest.raises(ClaimRefused, match=r"GPU 0 is claimed whole by .*'s p/whole"):
        await bed.launch(racer("shared", "t2", 1000))
    await wait_until(started("whole"), what="whole's start")
    await bed.host.kill("eqc_t1_whole_a1", str(bed.tmp / "logs" / "t1" / "whole" / "a1"),
                        "screen")
    outcomes = []
    for i in range(6):
        racers = [racer(f"w{i}", "t1", None), racer(f"s{i}", "t2", 1000),
                  racer(f"x{i}", "t3", 1000)]
        if i % 2:
            racers.reverse()  # who asks first changes from round to round
        done = await asyncio.gather(*(bed.launch(r) for r in racers), return_exceptions=True)
        went = sorted(r.job_id for r, d in zip(racers, done, strict=True) if d is None)
        for request, result in zip(racers, done, strict=True):
            assert result is None or isinstance(result, ClaimRefused), result
            assert (result is None) == Path(request.attempt_dir).exists()
        assert went == [f"w{i}"] or (went and f"w{i}" not in went), went
        claimed = sorted(c.job for c in await bed.claims_now() if c.gpu == 0)
        assert claimed == went
        outcomes.append(went)
        for job in went:
            await wait_until(started(job), what=f"{job}'s start")
        for request in racers:
            if request.job_id in went:
                await bed.host.kill(request.session, request.attempt_dir, "screen")
        assert await bed.claims_now() == ()
    intervals = [r for r in run_intervals(read_runs(state)) if r.gpu == 0]
    assert sorted(r.job for r in intervals) == sorted(
        ["whole", *(job for went in outcomes for job in went)])
    whole = [r for r in intervals if r.job.startswith("w")]  # "whole" and each w{i} that went
    assert not [pair for pair in find_overlaps(read_runs(state))
                if pair[0] in whole or pair[1] in whole], outcomes
