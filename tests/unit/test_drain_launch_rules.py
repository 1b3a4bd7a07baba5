"""Which draining GPUs a launch may wait on (engine/tick/drain_launch.py), fed probes directly
(tests/integration/test_drain_launch.py runs the wait itself through launch.sh): only a GPU
whose memory is all ours and going, only on a host no other engine uses, only where a watcher
reads the GPUs, a few per host, and not again after waiting in vain for the same release.

A real ledger, bus, run directory and host watchers; the probes are HostSnapshots as a host
returns them (a process's group and session told apart: a job that starts its own process
group stays in its wrapper's session)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from eq_tui.engine.tick.drain_launch import (
    DRAIN_WAIT_S,
    MAX_PER_HOST,
    DrainLaunches,
    all_going,
    shared_with_others,
)
from eq_tui.engine.tick.host_watchers import HostWatchers
from eq_tui.engine.tick.tick_timing import Pacing
from eq_tui.hosts.base import AttemptProbe, GpuProcess, GpuReading, HostSnapshot
from eq_tui.hosts.claim_types import GpuClaim
from eq_tui.hosts.lab_rules import HostLab
from eq_tui.hosts.watch import DRAIN_INTERVAL_S, WatchRequest
from tests.unit.test_memory_book import Bed

OURS = 4100  # the attempt's wrapper: it leads the attempt's process group and session
THRESHOLD = 500  # the manifest's gpu_free_threshold_mib (its default)


def attempt(pgid: int = OURS) -> AttemptProbe:
    return AttemptProbe(key="a", session_alive=False, pid=pgid + 1, pid_alive=False,
                        started=1.0, exit_code=0, exited_at=2.0, log_size=0, output_ok=None,
                        pgid=pgid)


def snapshot(bed: Bed, used: dict[int, int], processes: tuple[GpuProcess, ...] = (), *,
             claims: tuple[GpuClaim, ...] = (), lab: HostLab | None = None,
             attempts: tuple[AttemptProbe, ...] = (attempt(),)) -> HostSnapshot:
    gpus = tuple(GpuReading(i, f"GPU-{i}", "Sim", mib, 8000, 0) for i, mib in used.items())
    return HostSnapshot("h", True, bed.clock(), gpus=gpus, processes=processes,
                        attempts={f"a{i}": a for i, a in enumerate(attempts)},
                        claims=claims, lab=lab)


def proc(gpu: int, *, pgid: int | None = OURS, sid: int | None = OURS, mib: int = 3000,
         running: bool | None = True, pid: int = 4200) -> GpuProcess:
    return GpuProcess(pid, f"GPU-{gpu}", mib, pgid=pgid, sid=sid, running=running)


def claim(project: str, token: str, gpu: int = 1) -> GpuClaim:
    return GpuClaim(name=f"c.{gpu}.u.{project}", gpu=gpu, user="u", project=project,
                    token=token, job="j", attempt=1, pid=1, mib=None, session="s")


@dataclass
class Drains:
    bed: Bed
    pacing: Pacing
    watchers: HostWatchers
    drains: DrainLaunches

    def release(self, *gpus: int, host: str = "h") -> None:
        """Jobs of ours left these GPUs just now; the probe after it reads them draining."""
        self.pacing.released(host, list(gpus), self.bed.clock())

    def probe(self, snap: HostSnapshot, host: str = "h") -> None:
        self.bed.hosts[host].snapshot = replace(snap, host=host)


@pytest.fixture
async def drains(tmp_path: Path) -> AsyncIterator[Drains]:
    bed = Bed(tmp_path, [], [])
    pacing = Pacing(bed.ctx, poll=5.0)
    hosts = {name: record.host for name, record in bed.hosts.items()}
    watchers = HostWatchers(hosts, lambda *_: None)
    # the engine's watchers after a tick: a host watcher reading its GPUs (not yet run)
    watchers.sync({"h": WatchRequest(draining=(0,)), "g": WatchRequest(draining=(0,))})
    pacing.watchers = watchers
    yield Drains(bed, pacing, watchers, DrainLaunches(bed.ctx, pacing))
    await watchers.close()


def test_all_going_only_when_every_process_on_the_gpu_is_ours_or_gone(tmp_path: Path) -> None:
    bed = Bed(tmp_path, [], [])

    def going(*processes: GpuProcess, attempts: tuple[AttemptProbe, ...] = (attempt(),)) -> bool:
        return all_going(snapshot(bed, {0: 3000, 1: 0}, processes, attempts=attempts), 0)

    assert going()  # nothing listed: it drains to nothing
    assert going(proc(0))
    # a job of ours that put itself in its own process group stays in its wrapper's session;
    # one whose group is ours in a session it does not lead (a wrapper not leading one) too
    assert going(proc(0, pgid=4300, sid=OURS))
    assert going(proc(0, pgid=OURS, sid=4300))
    # another user's process (no claim, no attempt of ours) still runs there: it never drains
    assert not going(proc(0), proc(0, pgid=7000, sid=7000, pid=7001, mib=1000))
    assert not going(proc(0, pgid=None, sid=None))
    # ... unless the host's ps no longer has it (memory charged to a process that is gone)
    assert going(proc(0, pgid=7000, sid=7000, running=False))
    assert not going(proc(0, pgid=7000, sid=7000, running=None))
    # another GPU's processes are not this one's
    assert going(proc(1, pgid=7000, sid=7000))
    # our attempts without a known group own nothing
    assert not going(proc(0), attempts=(replace(attempt(), pgid=None),))
    # a GPU the probe did not list at all is not known to drain
    assert not all_going(snapshot(bed, {1: 3000}), 0)


def test_shared_with_others_by_claims_or_by_another_user_waiting(tmp_path: Path) -> None:
    bed = Bed(tmp_path, [], [])
    alone = snapshot(bed, {0: 3000}, claims=(claim("p", "t"),), lab=HostLab(user="u"))
    assert not shared_with_others(alone, "p", "t")
    assert not shared_with_others(replace(alone, lab=None), "p", "t")
    assert shared_with_others(replace(alone, claims=(claim("q", "t"),)), "p", "t")
    assert shared_with_others(replace(alone, claims=(claim("p", "t0"),)), "p", "t")
    assert shared_with_others(replace(alone, lab=HostLab(user="u", waiting=frozenset({"v"}))),
                              "p", "t")


async def test_a_draining_gpu_of_ours_alone_is_placed_and_its_launch_waits_for_it(
        drains: Drains) -> None:
    bed, d = drains.bed, drains.drains
    assert d.wait_for("h", (0,)) is None  # no tick has planned anything yet
    drains.release(0)
    # our own engine's claims (project p, token t) are no other engine's
    drains.probe(snapshot(bed, {0: 3000, 1: 0}, (proc(0),), claims=(claim("p", "t"),)))
    assert d.gpus(None, background=True) == {"h": frozenset({0})}
    assert d.gpus({"h"}, background=True) == {"h": frozenset({0})}
    wait = d.wait_for("h", (1, 0))
    assert wait is not None
    assert (wait.gpus, wait.below_mib, wait.every_s) == ((0,), THRESHOLD, DRAIN_INTERVAL_S)
    assert wait.rounds == round(DRAIN_WAIT_S / DRAIN_INTERVAL_S) == 100
    d.wait_s = 0.01  # never fewer than one more look
    assert d.wait_for("h", (0,)) == replace(wait, rounds=1)
    d.wait_s = 0.26
    assert d.wait_for("h", (0,)) == replace(wait, rounds=3)
    assert d.wait_for("h", (1,)) is None  # not draining: nothing to wait for
    assert d.wait_for("g", (0,)) is None
    assert d.placed == 0
    d.started("s1", "h", wait)
    assert d.placed == 1


async def test_a_gpu_reading_exactly_the_free_threshold_still_drains(drains: Drains) -> None:
    """The threshold is the first reading that is not free (nvidia-smi's used < threshold is
    free, here and in _drain_wait.sh): at exactly 500 MiB the GPU is still draining and a
    launch may wait on it; at 499 it is free and nothing waits."""
    bed, d = drains.bed, drains.drains
    drains.release(0)
    drains.probe(snapshot(bed, {0: THRESHOLD}, (proc(0, mib=THRESHOLD),)))
    assert d.gpus(None, background=True) == {"h": frozenset({0})}
    drains.probe(snapshot(bed, {0: THRESHOLD - 1}, (proc(0, mib=THRESHOLD - 1),)))
    assert d.gpus(None, background=True) == {}


async def test_no_wait_on_a_gpu_where_another_users_process_still_runs(drains: Drains) -> None:
    """Our job's memory goes, someone else's process (no claim: not an eq-tui job) stays: the GPU
    never reads empty, so no launch waits there (it would wait in vain and be refused)."""
    bed, d = drains.bed, drains.drains
    drains.release(0, 1)
    theirs = proc(0, pgid=7000, sid=7000, pid=7001, mib=1000)
    drains.probe(snapshot(bed, {0: 4000, 1: 3000}, (proc(0), theirs, proc(1))))
    assert d.gpus(None, background=True) == {"h": frozenset({1})}
    # once their process is gone (the host's ps lists it no more), GPU 0 drains as well
    drains.probe(snapshot(bed, {0: 4000, 1: 3000},
                          (proc(0), replace(theirs, running=False), proc(1))))
    assert d.gpus(None, background=True) == {"h": frozenset({0, 1})}
    # a job of ours in its own process group (its wrapper's session) is ours all the same
    drains.probe(snapshot(bed, {0: 4000, 1: 3000}, (proc(0, pgid=4300), proc(1, sid=4300))))
    assert d.gpus(None, background=True) == {"h": frozenset({0, 1})}


async def test_nothing_waits_where_the_tick_awaits_or_nothing_watches_or_others_use_the_host(
        drains: Drains) -> None:
    bed, d = drains.bed, drains.drains
    drains.release(0)
    drains.release(0, host="g")
    drains.probe(snapshot(bed, {0: 3000}, (proc(0),)))
    drains.probe(snapshot(bed, {0: 3000}, (proc(0),)), host="g")
    assert d.gpus(None, background=True) == {"h": frozenset({0}), "g": frozenset({0})}
    assert d.gpus(None, background=False) == {}  # a launch the tick awaits would hold it
    assert d.wait_for("h", (0,)) is None  # the plan is this tick's
    assert d.gpus({"g"}, background=True) == {"g": frozenset({0})}  # only the hosts probed
    bed.ctx.paused = True
    assert d.gpus(None, background=True) == {}
    bed.ctx.paused = False
    watchers = drains.pacing.watchers
    drains.pacing.watchers = None
    assert d.gpus(None, background=True) == {}
    drains.pacing.watchers = watchers
    # the watcher on g stops (nothing left for it there): no watcher reads g's GPUs
    drains.watchers.sync({"h": WatchRequest(draining=(0,))})
    assert d.gpus(None, background=True) == {"h": frozenset({0})}
    # another engine's claim on any GPU of the host (another project's, or another run of
    # ours), or another user's engine waiting there
    for other in (claim("q", "t"), claim("p", "t9")):
        drains.probe(snapshot(bed, {0: 3000}, (proc(0),), claims=(claim("p", "t"), other)))
        assert d.gpus(None, background=True) == {}
    drains.probe(snapshot(bed, {0: 3000}, (proc(0),),
                          lab=HostLab(user="u", waiting=frozenset({"v"}))))
    assert d.gpus(None, background=True) == {}
    bed.hosts["h"].snapshot = None
    assert d.gpus(None, background=True) == {}


async def test_at_most_max_per_host_launches_wait_at_once_on_a_host(drains: Drains) -> None:
    bed, d = drains.bed, drains.drains
    gpus = tuple(range(MAX_PER_HOST + 1))
    drains.release(*gpus)
    drains.probe(snapshot(bed, dict.fromkeys(gpus, 3000), tuple(proc(g) for g in gpus)))
    assert d.gpus(None, background=True) == {"h": frozenset(gpus[:MAX_PER_HOST])}
    wait = d.wait_for("h", (0,))
    assert wait is not None
    d.started("s0", "h", wait)
    d.started("other-host", "g", replace(wait, gpus=(0,)))  # another host's wait: not h's
    assert d.gpus(None, background=True) == {"h": frozenset(gpus[:MAX_PER_HOST - 1])}
    for i in range(1, MAX_PER_HOST):
        d.started(f"s{i}", "h", replace(wait, gpus=(i,)))
    assert d.gpus(None, background=True) == {}
    d.ended("s1", in_vain=False)  # one returned: room for one more
    assert d.gpus(None, background=True) == {"h": frozenset({0})}
    assert d.placed == MAX_PER_HOST + 1


async def test_a_wait_in_vain_is_not_tried_again_until_the_gpu_is_released_again(
        drains: Drains) -> None:
    bed, d = drains.bed, drains.drains
    drains.release(0, 1)
    drains.probe(snapshot(bed, {0: 3000, 1: 3000}, (proc(0), proc(1))))
    wait = d.wait_for("h", (0,)) if d.gpus(None, background=True) else None
    assert wait is not None
    d.started("s", "h", wait)
    d.ended("s", in_vain=True)
    assert d.gpus(None, background=True) == {"h": frozenset({1})}
    d.ended("s", in_vain=True)  # told twice: nothing more to forget
    assert d.gpus(None, background=True) == {"h": frozenset({1})}
    bed.clock.now += 1
    drains.release(0)  # a job of ours left it again: a new release, a new wait
    drains.probe(snapshot(bed, {0: 3000, 1: 3000}, (proc(0), proc(1))))
    assert d.gpus(None, background=True) == {"h": frozenset({0, 1})}
    # a launch that was not refused leaves its GPUs open to the next wait
    d.started("t", "h", replace(wait, gpus=(1,)))
    d.ended("t", in_vain=False)
    assert d.gpus(None, background=True) == {"h": frozenset({0, 1})}


async def test_the_watcher_reads_a_freed_gpu_only_where_no_launch_waits_for_it(
        drains: Drains) -> None:
    bed, d = drains.bed, drains.drains
    assert d.watch_after_exit("h")  # no probe yet: not known to be ours alone
    assert d.watch_after_exit("elsewhere")
    drains.probe(snapshot(bed, {0: 3000}, (proc(0),), claims=(claim("p", "t"),)))
    assert not d.watch_after_exit("h")
    for other in (claim("q", "t"), claim("p", "t9")):
        drains.probe(snapshot(bed, {0: 3000}, (proc(0),), claims=(other,)))
        assert d.watch_after_exit("h")


async def test_a_host_left_out_does_not_stop_the_next_hosts_wait(drains: Drains) -> None:
    bed, d = drains.bed, drains.drains
    drains.release(0, host="g")  # g first: another engine uses it
    drains.release(0)
    drains.probe(snapshot(bed, {0: 3000}, (proc(0),), claims=(claim("q", "t9"),)), host="g")
    drains.probe(snapshot(bed, {0: 3000}, (proc(0),)))
    assert d.gpus(None, background=True) == {"h": frozenset({0})}
    bed.hosts["g"].snapshot = None  # g not probed yet
    assert d.gpus(None, background=True) == {"h": frozenset({0})}
