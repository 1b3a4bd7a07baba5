"""A launch placed while its GPU's last job of ours still releases its memory waits on the host
(launch.sh, _drain_wait.sh) and starts the job as the memory goes, never before; a GPU whose
memory is not released in time refuses the launch (nothing started, no attempt spent). Judged
from the simulated GPUs' own records: when each fake job started, ended and let its memory go."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from eq_tui.hosts.base import DrainWait, LaunchRequest
from eq_tui.hosts.claims import ClaimRefused
from eq_tui.hosts.factory import sim_state_dir
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.hosts.shell_protocol import launch_stdin, script
from eq_tui.manifest.model import HostSpec, SimulateSpec
from eq_tui.sim.state import find_overlaps, hold_memory, init_sim_state, read_runs, sim_bin_dir
from tests.support.engine_run import job, make_manifest, run_to_end, sim_hosts, start_engine
from tests.support.polling import wait_until

pytestmark = pytest.mark.integration
SLOW_RELEASE = "fake-train --epochs 1 --epoch-seconds 0.1 --mem 3000 --linger {linger}"


@dataclass
class Bed:
    host: ShellHost
    tmp: Path
    env: dict[str, str]
    state: Path

    def request(self, name: str, cmd: str, drain: DrainWait | None) -> LaunchRequest:
        return LaunchRequest(job_id=name, attempt=1, session=f"eqd_{name}_a1",
                             attempt_dir=str(self.tmp / "logs" / name / "a1"), cwd=str(self.tmp),
                             cmd=cmd, gpus=(0,), env={"CUDA_VISIBLE_DEVICES": "0"}, conda=None,
                             conda_hook=None, launcher="screen", drain=drain)

    def train(self, *args: str) -> None:
        """A fake job run by hand on GPU 0 (its memory lingers as the simulator says)."""
        subprocess.run(["fake-train", *args], env={**self.env, "CUDA_VISIBLE_DEVICES": "0",
                                                   "EQ_JOB_ID": "before"},
                       check=True, capture_output=True, timeout=60)

    def sessions(self) -> str:
        return subprocess.run(["screen", "-ls"], env=self.env, capture_output=True,
                              text=True).stdout


@pytest.fixture
async def bed() -> AsyncIterator[Bed]:
    tmp = Path(tempfile.mkdtemp(prefix="eqdr-"))  # short: screen's socket path stays short
    (tmp / "screen").mkdir(mode=0o700)
    state = init_sim_state(tmp / "sim", host="d", gpus=1, memory_mib=8000)
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "STY")}
    env.update(PATH=f"{sim_bin_dir()}{os.pathsep}{env['PATH']}", EQ_SIM_STATE=str(state),
               SCREENDIR=str(tmp / "screen"))
    yield Bed(ShellHost("d", LocalRunner(env), session_prefix="eqd_"), tmp, env, Path(state))
    subprocess.run(["screen", "-wipe"], env=env, capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


async def written(path: Path) -> bool:
    return path.exists() and path.read_text().strip() != ""


def drain(rounds: int) -> DrainWait:
    return DrainWait(gpus=(0,), below_mib=500, rounds=rounds, every_s=0.1)


async def test_a_launch_waits_on_the_host_until_its_gpu_drains(bed: Bed) -> None:
    bed.train("--epochs", "1", "--epoch-seconds", "0.05", "--mem", "3000", "--linger", "1.5")
    [ended] = [r for r in read_runs(bed.state) if r["event"] == "end"]
    stamp = bed.tmp / "started"
    await bed.host.launch(bed.request("next", f"date +%s.%N > {stamp}", drain(100)))
    await wait_until(lambda: written(stamp), timeout=30, what="the job's start")
    started = float(stamp.read_text())
    assert started >= float(ended["linger_until"])  # the host's clock: never before the release


async def test_a_gpu_that_does_not_drain_in_time_refuses_the_launch_and_leaves_nothing(
        bed: Bed) -> None:
    holder = subprocess.Popen(["sleep", "60"])
    try:
        hold_memory(bed.state, holder.pid, 0, 3000)
        stamp = bed.tmp / "started"
        with pytest.raises(ClaimRefused, match=r"was not released in time \(GPU 0 holds 3"):
            await bed.host.launch(bed.request("late", f"date > {stamp}", drain(3)))
        assert not (bed.tmp / "logs" / "late" / "a1").exists()
        assert "eqd_late_a1" not in bed.sessions() and not stamp.exists()
        # the same launch with no drain to wait for is the engine's word, as always
        await bed.host.launch(bed.request("late", f"date > {stamp}", None))
        await wait_until(lambda: written(stamp), timeout=30, what="the job's start")
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("line", ["D 0 500 x 0.1", "D - 500 3 0.1", "D 0,1 5e2 3 0.1",
                                  "D 0 500 3 0.1;touch"])
def test_a_malformed_drain_line_starts_nothing(bed: Bed, line: str) -> None:
    request = bed.request("bad", f"date > {bed.tmp / 'started'}", None)
    stdin = line.encode() + b"\n" + launch_stdin(request)
    done = subprocess.run(["sh", "-c", script("launch.sh"), "launch.sh", "screen",
                           request.session, request.attempt_dir], input=stdin,
                          capture_output=True, env=bed.env, timeout=30)
    assert done.returncode == 9, done.stderr
    assert b"cut off" in done.stderr and not Path(request.attempt_dir).exists()


def runs_of(run: Any, name: str) -> list[dict[str, Any]]:
    return [r for r in run.runs() if r.get("job") == name]


async def first_then_second(tmp_path: Path, *, linger: float, gpus: int = 1, poll: float = 0.2
                            ) -> tuple[Any, float, list[dict[str, Any]]]:
    """Two jobs on simulated GPU 0, the first's memory lingering `linger` s after it ends:
    the run, when the first's memory went, and the second's start records (the hosts')."""
    manifest = make_manifest(tmp_path, [job("first", SLOW_RELEASE.format(linger=linger)),
                                        job("second", SLOW_RELEASE.format(linger=0))],
                             hosts=sim_hosts(("sim", gpus)))
    code, run = await run_to_end(manifest, tmp_path / "run", poll=poll)
    assert code == 0
    [first_end] = [r for r in runs_of(run, "first") if r["event"] == "end"]
    starts = [r for r in runs_of(run, "second") if r["event"] == "start"]
    return run, float(first_end["linger_until"]), starts


async def test_the_next_job_is_placed_while_the_gpu_drains_and_starts_as_it_goes(
        tmp_path: Path) -> None:
    run, released, [second_start] = await first_then_second(tmp_path, linger=2.0)
    assert float(second_start.get("exec_t", second_start["t"])) >= released
    assert find_overlaps(run.runs(), include_linger=True) == []
    # the engine placed it before the memory went: the launch waited on the host
    decided = next(e.at for e in run.events if getattr(e, "job", None) == "second"
                   and e.type == "job_state_changed" and e.new == "launching")
    assert decided < released
    assert run.engine.launcher.drains.placed == 1
    assert len(run.job("second")["history"]) == 1


async def test_a_drain_wait_in_vain_spends_no_attempt_and_is_not_tried_again_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory lingers 3 s; a launch waits at most 0.3 s on the host: refused, the job
    waits with no attempt spent, and goes once the watcher reads the GPU free (no second wait
    on that GPU for the same release)."""
    monkeypatch.setattr("eq_tui.engine.tick.drain_launch.DRAIN_WAIT_S", 0.3)
    run, released, starts = await first_then_second(tmp_path, linger=3.0)
    assert len(starts) == 1
    assert float(starts[0].get("exec_t", starts[0]["t"])) >= released
    assert run.engine.launcher.drains.placed == 1
    assert len(run.job("second")["history"]) == 1
    refused = [e for e in run.events if getattr(e, "job", None) == "second"
               and e.type == "job_state_changed" and e.old == "launching" and e.new == "pending"]
    assert len(refused) == 1 and "was not released in time" in refused[0].detail


def nvidia_smi_askers(calls: Path) -> Counter[str]:
    """Which host scripts ran the simulated nvidia-smi, and how often (EQ_SIM_CALLS)."""
    text = calls.read_text() if calls.exists() else ""
    return Counter(line.split()[0] for line in text.splitlines() if line.strip())


async def test_the_watcher_leaves_a_gpu_to_the_launch_that_waits_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch placed on the draining GPU reads its memory on the host; the watcher does not
    read it as well after the exit (it did, every 0.1 s until the memory went, on every exit of
    a sweep). Counted from the simulated nvidia-smi's own record of who ran it."""
    calls = tmp_path / "calls"
    monkeypatch.setenv("EQ_SIM_CALLS", str(calls))
    # a poll longer than the run: the watcher, not a probe, sees the exit
    run, released, [second_start] = await first_then_second(tmp_path, linger=2.0, poll=30.0)
    assert float(second_start.get("exec_t", second_start["t"])) >= released
    assert run.engine.launcher.drains.placed == 1
    askers = nvidia_smi_askers(calls)
    assert askers["launch.sh"] >= 2  # the wait read it until the memory went
    assert askers["watch.sh"] == 0


async def test_where_another_engine_uses_the_host_the_watcher_still_reads_the_freed_gpu(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another engine holds GPU 1 (its claim): no drain wait on this host, so the watcher reads
    GPU 0 until the first job's memory goes, and the second starts after that, as before."""
    calls = tmp_path / "calls"
    monkeypatch.setenv("EQ_SIM_CALLS", str(calls))
    holder = subprocess.Popen(["sleep", "300"])
    try:
        claims = sim_state_dir(tmp_path / "run", "sim") / "claims"
        claims.mkdir(parents=True)
        (claims / "c.1.bob.q.beef01.theirs.a1").write_text(
            f"eqclaim1 1 bob q beef01 theirs 1 {holder.pid} - - eq_q_beef01_theirs_a1\n")
        run, released, [second_start] = await first_then_second(tmp_path, linger=2.0, gpus=2,
                                                                poll=30.0)
    finally:
        holder.kill()
        holder.wait()
    assert float(second_start.get("exec_t", second_start["t"])) >= released
    assert run.engine.launcher.drains.placed == 0
    starts = [r for r in run.runs() if r["event"] == "start"]
    assert [int((r.get("gpus") or [r["gpu"]])[0]) for r in starts] == [0, 0]
    askers = nvidia_smi_askers(calls)
    assert askers["watch.sh"] >= 2 and askers["launch.sh"] == 0


async def test_beside_a_packed_job_still_running_the_next_waits_for_room_not_a_drain(
        tmp_path: Path) -> None:
    """Packing meets the drain wait: two 10 GB jobs share a 24 GiB GPU and the short one's
    memory lingers 2 s after it ends. The GPU will not read empty (the long one runs on), so
    no launch waits on the host for it; the third starts once the short one's memory is gone,
    never beside it (it would run out of memory: the simulator's records say whether it did)."""
    hosts = (HostSpec(name="sim", max_parallel=16,
                      simulate=SimulateSpec(gpus=1, memory_mib=24576)),)
    packed = "fake-train --epochs 4 --epoch-seconds {seconds} --mem 10000 --linger {linger}"
    jobs = [job("long", packed.format(seconds=1.5, linger=0), mem_mib=10000),
            job("short", packed.format(seconds=0.1, linger=2.0), mem_mib=10000),
            job("third", packed.format(seconds=0.1, linger=0), mem_mib=10000)]
    code, run = await run_to_end(make_manifest(tmp_path, jobs, hosts=hosts), tmp_path / "run")
    assert code == 0
    assert [r for r in run.runs() if r["event"] == "oom"] == []
    [short_end] = [r for r in runs_of(run, "short") if r["event"] == "end"]
    [long_start] = [r for r in runs_of(run, "long") if r["event"] == "start"]
    [long_end] = [r for r in runs_of(run, "long") if r["event"] == "end"]
    [third_start] = [r for r in runs_of(run, "third") if r["event"] == "start"]
    started = float(third_start.get("exec_t", third_start["t"]))
    assert started >= float(short_end["linger_until"])
    # it went beside the long one (room, not an empty GPU), and nothing waited on the host
    assert float(long_start["t"]) < started < float(long_end["t"])
    assert run.engine.launcher.drains.placed == 0
    assert len(run.job("third")["history"]) == 1


def test_no_drain_wait_on_a_host_another_engine_uses() -> None:
    """Another engine's claim on any GPU of the host, or another user's engine waiting there:
    a freed GPU is left to the fair turns (their want files, _fair_turns.sh), as before."""
    from eq_tui.engine.tick.drain_launch import shared_with_others
    from eq_tui.hosts.base import HostSnapshot
    from eq_tui.hosts.claim_types import GpuClaim
    from eq_tui.hosts.lab_rules import HostLab

    def claim(project: str, token: str) -> GpuClaim:
        return GpuClaim(name=f"c.1.u.{project}", gpu=1, user="u", project=project, token=token,
                        job="j", attempt=1, pid=1, mib=None, session="s")

    alone = HostSnapshot(host="h", ok=True, taken_at=0.0, claims=(claim("me", "t1"),),
                         lab=HostLab(user="u"))
    assert not shared_with_others(alone, "me", "t1")
    assert shared_with_others(replace(alone, claims=(claim("other", "t2"),)), "me", "t1")
    assert shared_with_others(replace(alone, claims=(claim("me", "t0"),)), "me", "t1")
    assert shared_with_others(replace(alone, lab=HostLab(user="u", waiting=frozenset({"v"}))),
                              "me", "t1")


async def test_a_gpu_reading_exactly_the_free_threshold_has_not_drained(bed: Bed) -> None:
    """The threshold is the first reading that is not free (the engine's too: used below it is
    free): a GPU holding exactly `below_mib` refuses the launch; one MiB less lets it start."""
    holder = subprocess.Popen(["sleep", "60"])
    try:
        hold_memory(bed.state, holder.pid, 0, 500)
        stamp = bed.tmp / "started"
        with pytest.raises(ClaimRefused, match=r"\(GPU 0 holds 500 MiB\)"):
            await bed.host.launch(bed.request("at", f"date > {stamp}", drain(2)))
        assert "eqd_at_a1" not in bed.sessions() and not stamp.exists()
        hold_memory(bed.state, holder.pid, 0, 499)
        await bed.host.launch(bed.request("under", f"date > {stamp}", drain(2)))
        await wait_until(lambda: written(stamp), timeout=30, what="the job's start")
    finally:
        holder.kill()
        holder.wait()


async def test_no_drain_wait_where_another_users_process_stays_on_the_gpu(
        tmp_path: Path) -> None:
    """The first job's memory lingers 2 s after it ends, and a process of someone else's (no
    claim, no attempt of ours: not an eq-tui job) holds 1000 MiB on the same GPU. The GPU will
    not read empty as the first job's memory goes, so no launch waits on the host for it (it
    would hold a channel and be refused in vain); the second starts once the other is gone."""
    manifest = make_manifest(tmp_path, [
        job("first", "fake-train --epochs 2 --epoch-seconds 1 --mem 3000 --linger 2"),
        job("second", SLOW_RELEASE.format(linger=0))], hosts=sim_hosts(("sim", 1)))
    run = await start_engine(manifest, tmp_path / "run")
    holder = subprocess.Popen(["sleep", "120"])
    try:
        await run.wait_for(lambda: any(r["event"] == "start" for r in runs_of(run, "first")))
        hold_memory(sim_state_dir(tmp_path / "run", "sim"), holder.pid, 0, 1000)
        await run.wait_for(lambda: any(r["event"] == "end" for r in runs_of(run, "first")))
        [first_end] = [r for r in runs_of(run, "first") if r["event"] == "end"]
        await run.wait_for(lambda: time.time() > float(first_end["linger_until"]))
        await run.ticks_pass(3)  # the first's memory is gone; the other's still holds the GPU
        assert run.status("second") == "pending"
        assert run.engine.launcher.drains.placed == 0
        holder.kill()
        holder.wait()
        gone = time.time()
        assert run.task is not None
        assert await asyncio.wait_for(asyncio.shield(run.task), 60) == 0
    finally:
        holder.kill()
        holder.wait()
        await run.stop()
    [second_start] = [r for r in runs_of(run, "second") if r["event"] == "start"]
    assert float(second_start.get("exec_t", second_start["t"])) >= gone
    # once the other's process is gone its memory is going too: a launch may then wait on
    # the host for it (drains.placed 1, seen under load), never before and never in vain
    assert not [e for e in run.events if getattr(e, "job", None) == "second"
                and e.type == "job_state_changed" and e.new == "pending"
                and "not released in time" in (e.detail or "")]
    assert len(run.job("second")["history"]) == 1


async def test_a_wait_of_n_rounds_reads_the_gpus_n_plus_one_times_then_refuses(
        bed: Bed) -> None:
    """Each round reads nvidia-smi once on the host (the simulator's record of who asked): a
    GPU that does not drain is read `rounds` + 1 times, then the launch is refused."""
    calls = bed.tmp / "calls"
    host = ShellHost("d", LocalRunner({**bed.env, "EQ_SIM_CALLS": str(calls)}),
                     session_prefix="eqd_")
    holder = subprocess.Popen(["sleep", "60"])
    try:
        hold_memory(bed.state, holder.pid, 0, 3000)
        with pytest.raises(ClaimRefused, match=r"not released in time \(GPU 0 holds 3000 MiB\)"):
            await host.launch(bed.request("rounds", "true", drain(2)))
    finally:
        holder.kill()
        holder.wait()
    assert nvidia_smi_askers(calls) == {"launch.sh": 3}
    assert not (bed.tmp / "logs" / "rounds" / "a1").exists()
