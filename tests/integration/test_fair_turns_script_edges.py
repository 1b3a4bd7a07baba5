"""Fair turns at launch (_fair_turns.sh), through the real launch.sh on this machine: how long
a turn lasts and when it starts again, which waiting engines count, what the launching engine
holds, and the room a waiting engine's jobs would find on the GPU. Real screen sessions,
simulated GPUs; the engines are run tokens of one user, each its own want file and claims."""

from __future__ import annotations

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
from eq_tui.hosts.claim_types import ClaimTicket
from eq_tui.hosts.claims import ClaimRefused, WaitingNeed, want_arg
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.sim.state import hold_memory, init_sim_state, sim_bin_dir
from tests.support.polling import wait_until

pytestmark = pytest.mark.integration
USER = os.environ.get("USER") or os.environ.get("LOGNAME") or "root"


@dataclass
class Bed:
    tmp: Path
    env: dict[str, str]
    claims: Path
    started: list[tuple[str, str]] = field(default_factory=list)

    def host(self, path: str | None = None) -> ShellHost:
        env = dict(self.env, PATH=path) if path else self.env
        return ShellHost("f", LocalRunner(env), session_prefix="eqf_")

    def request(self, job: str, token: str, gpu: int, mib: int | None,
                cmd: str = "sleep 60") -> LaunchRequest:
        return LaunchRequest(
            job_id=job, attempt=1, session=f"eqf_{token}_{job}_a1",
            attempt_dir=str(self.tmp / "logs" / token / job / "a1"), cwd=str(self.tmp),
            cmd=cmd, gpus=(gpu,), env={"CUDA_VISIBLE_DEVICES": str(gpu)}, conda=None,
            conda_hook=None, launcher="screen", claim=ClaimTicket("p", token, mib, ()))

    async def launch(self, job: str, token: str, gpu: int, mib: int | None = None, *,
                     cmd: str = "sleep 60", path: str | None = None) -> None:
        request = self.request(job, token, gpu, mib, cmd)
        self.started.append((request.session, request.attempt_dir))
        await self.host(path).launch(request)

    async def kill(self, job: str, token: str) -> None:
        await self.host().kill(f"eqf_{token}_{job}_a1",
                               str(self.tmp / "logs" / token / job / "a1"), "screen")

    async def wants(self, token: str, need: WaitingNeed | None = None, *, poll_s: float = 1,
                    gpus: tuple[int, ...] | None = None) -> None:
        """Engine `token`'s probe: it waits here, with jobs that need `need`."""
        snap = await self.host().probe(ProbeRequest(want=want_arg(
            "p", token, waiting=True, poll_s=poll_s, gpus=gpus, need=need)))
        assert snap.ok, snap.error

    @property
    def marker(self) -> Path:
        """Since when t1 (the launching engine) has let the GPUs go to others' turns."""
        return self.claims / f"y.{USER}.p.t1"

    def age(self, path: Path, seconds: float) -> None:
        when = time.time() - seconds
        os.utime(path, (when, when))


@pytest.fixture
async def bed() -> AsyncIterator[Bed]:
    tmp = Path(tempfile.mkdtemp(prefix="eqft-"))  # short: screen's socket path stays short
    (tmp / "screen").mkdir(mode=0o700)
    state = init_sim_state(tmp / "sim", host="f", gpus=2, memory_mib=8000)
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "STY")}
    env.update(PATH=f"{sim_bin_dir()}{os.pathsep}{env['PATH']}", EQ_SIM_STATE=str(state),
               SCREENDIR=str(tmp / "screen"), EQ_TUI_CLAIMS=str(tmp / "claims"), USER=USER)
    bed = Bed(tmp, env, tmp / "claims")
    yield bed
    for session, directory in bed.started:
        await bed.host().kill(session, directory, "screen")
    subprocess.run(["screen", "-wipe"], env=env, capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


TURN = r"fair turn: .*'s p holds {held} MiB of GPU memory here"


async def test_a_turn_lasts_its_time_starts_again_when_the_waiter_takes_something_and_ends(
        bed: Bed) -> None:
    await bed.launch("a", "t1", 0)  # t1 holds GPU 0 whole: 8000 MiB
    await bed.wants("t2")
    with pytest.raises(ClaimRefused, match=TURN.format(held=0)):
        await bed.launch("b", "t1", 1, 1000)
    assert bed.marker.read_text() == f"{USER}.p.t2:0\n"
    # the turn lasts 3 of t2's polls + 10 s: a launch right after is refused as well
    with pytest.raises(ClaimRefused, match=TURN.format(held=0)):
        await bed.launch("b", "t1", 1, 1000)
    # t2 takes something: its turn starts again from now
    await bed.launch("x", "t2", 1, 1000)
    bed.age(bed.marker, 12)
    with pytest.raises(ClaimRefused, match=TURN.format(held=1000)):
        await bed.launch("b", "t1", 1, 1000)
    assert bed.marker.read_text() == f"{USER}.p.t2:1000\n"
    bed.age(bed.marker, 14)  # and ends, t2 having taken nothing more
    await bed.launch("b", "t1", 1, 1000)
    assert not bed.marker.exists()
    # a turn that no one waits for any more, or that the waiter could not use, is over
    for gone in ("want", "gpus"):
        with pytest.raises(ClaimRefused, match=TURN.format(held=1000)):
            await bed.launch(f"c{gone}", "t1", 1, 1000)
        assert bed.marker.exists()
        if gone == "want":
            (bed.claims / f"w.{USER}.p.t2").unlink()
        else:
            await bed.wants("t2", gpus=(0,))
        await bed.launch(f"c{gone}", "t1", 1, 1000)
        assert not bed.marker.exists()
        await bed.kill(f"c{gone}", "t1")
        await bed.wants("t2")


async def test_a_turn_for_several_engines_lasts_as_long_as_the_slowest_pollers(
        bed: Bed) -> None:
    await bed.launch("a", "t1", 0)
    await bed.wants("t2", poll_s=30)  # its turn: 3 x 30 + 10 s
    await bed.wants("t3", poll_s=1)  # 3 x 1 + 10 s
    with pytest.raises(ClaimRefused, match="fair turn"):
        await bed.launch("b", "t1", 1)
    bed.age(bed.marker, 20)
    with pytest.raises(ClaimRefused, match="fair turn"):
        await bed.launch("b", "t1", 1)


async def test_only_a_want_file_and_live_claims_count(bed: Bed) -> None:
    """A file in the claims directory named like a want but not one waits for nothing; a
    claim of ours whose process is gone holds nothing of ours."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    bed.claims.mkdir(mode=0o1777)
    (bed.claims / f"c.0.{USER}.p.t1.old.a1").write_text(
        f"eqclaim1 0 {USER} p t1 old 1 {gone.pid} - - eqf_t1_old_a1\n")
    (bed.claims / "w.someone.q.beef01").write_text("eqwant2 someone q beef01 1 all - - -\n")
    await bed.wants("t2")  # it holds nothing; nor do we (live)
    await bed.launch("b", "t1", 1)
    (bed.claims / f"w.{USER}.p.t2").unlink()
    await bed.launch("c", "t1", 0)  # we hold both GPUs; only the file that is no want is left


async def test_the_room_a_waiter_would_find_is_the_gpus_less_what_others_hold_and_will(
        bed: Bed) -> None:
    """GPU 0: another engine's (t3) job claimed 1000 MiB and allocated 3000, more than its
    estimate: the GPU has 5000 MiB for a waiting engine's job, exactly, if we put nothing more
    on it."""
    await bed.launch("a", "t1", 1)  # t1 holds GPU 1 whole
    await bed.launch("z", "t3", 0, 1000, cmd="fake-train --mem 3000 --epochs 120 "
                                            "--epoch-seconds 0.5")

    async def allocated() -> bool:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used",
                              "--format=csv,noheader,nounits"], env=bed.env,
                             capture_output=True, text=True).stdout.split()
        return int(out[0]) == 3000

    await wait_until(allocated, timeout=30, what="z's memory")
    await bed.wants("t2", WaitingNeed(share_mib=5001))
    await bed.launch("b", "t1", 0, 1000)
    await bed.kill("b", "t1")
    await bed.wants("t2", WaitingNeed(share_mib=5000))
    with pytest.raises(ClaimRefused, match=r"fair turn: .* could use GPU 0"):
        await bed.launch("c", "t1", 0, 1000)


async def test_the_room_on_a_gpu_is_that_gpus_reading_less_its_own_claims_others_but_ours(
        bed: Bed) -> None:
    """The GPU t1 launches on (1) is free; GPU 0 holds a stranger's 6000 MiB and t3's claim on
    it whole. What t2 (waiting, 7500 MiB a job) would find on GPU 1 is GPU 1's 8000 MiB: not
    GPU 0's reading, not t3's claim there, and not t1's own claim on GPU 1 (ours is never taken
    off: it is what the turn would give up). So t2 has its turn."""
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        hold_memory(bed.env["EQ_SIM_STATE"], stranger.pid, 0, 6000)
        await bed.launch("w", "t3", 0)  # t3 holds GPU 0 whole
        await bed.launch("a", "t1", 1, 1000)
        await bed.wants("t2", WaitingNeed(share_mib=7500))
        with pytest.raises(ClaimRefused, match=r"fair turn: .* could use GPU 1"):
            await bed.launch("b", "t1", 1, 1000)
    finally:
        stranger.kill()
        stranger.wait()


async def test_a_gpu_is_free_for_a_job_alone_only_with_no_one_elses_claim_or_memory(
        bed: Bed) -> None:
    """A waiting engine whose jobs want GPUs alone (free below 500 MiB) has no turn of a GPU
    where another engine holds a claim, however small, or where someone else's process holds
    500 MiB or more."""
    await bed.launch("a", "t1", 1)  # t1 holds GPU 1 whole
    await bed.launch("z", "t3", 0, 100)
    await bed.wants("t2", WaitingNeed(alone_below_mib=500))
    await bed.launch("b", "t1", 0, 1000)
    await bed.kill("b", "t1")
    await bed.kill("z", "t3")
    holder = subprocess.Popen(["sleep", "60"])
    try:
        hold_memory(bed.env["EQ_SIM_STATE"], holder.pid, 0, 500)
        await bed.launch("c", "t1", 0, 1000)
        await bed.kill("c", "t1")
        hold_memory(bed.env["EQ_SIM_STATE"], holder.pid, 0, 499)
        with pytest.raises(ClaimRefused, match=r"fair turn: .* could use GPU 0"):
            await bed.launch("d", "t1", 0, 1000)
    finally:
        holder.kill()
        holder.wait()


async def test_without_nvidia_smi_a_gpu_claimed_whole_counts_64_gib(bed: Bed) -> None:
    broken = bed.tmp / "nosmi"
    broken.mkdir()
    (broken / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")
    (broken / "nvidia-smi").chmod(0o755)
    path = f"{broken}{os.pathsep}{bed.env['PATH']}"
    await bed.launch("a", "t1", 0, path=path)
    await bed.wants("t2", WaitingNeed(share_mib=500))
    with pytest.raises(ClaimRefused, match=r"holds 0 MiB .* could use GPU 1; we hold 65536 MiB"):
        await bed.launch("b", "t1", 1, 1000, path=path)
