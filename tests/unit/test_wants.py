"""What this engine's probes tell a host of its waiting (engine/tick/wants.py): which jobs wait
now and until when, what each asks on a shared GPU, the least its waiting jobs need, and the GPUs
it may use there: the host entry's, less what the lab's rules keep from it, and only those its
user already holds once that user is at `max_gpus_per_user` while another user waits.

A real ledger and host records; the probes are HostSnapshots as a host returns them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.tick.memory import learned_estimate
from eq_tui.engine.tick.wants import Wants, due_at, share_need, waiting_need, waiting_need_until
from eq_tui.hosts.base import GpuReading, HostSnapshot
from eq_tui.hosts.claim_types import GpuClaim
from eq_tui.hosts.claims import WaitingNeed
from eq_tui.hosts.lab_rules import HostLab, LabRules
from eq_tui.manifest.model import HostSpec, JobSpec, Manifest
from tests.support.context_bed import Clock, context

MARGIN = 1024
THRESHOLD = 500


def spec(id: str, **kwargs: Any) -> JobSpec:
    return JobSpec(id=id, phase="main", cmd="train", **kwargs)


def state(id: str, status: JobStatus = JobStatus.PENDING, **kwargs: Any) -> JobState:
    return JobState(id=id, phase="main", cmd="train", status=status, **kwargs)


def manifest(specs: list[JobSpec], hosts: tuple[HostSpec, ...] = (HostSpec(name="h"),),
             ) -> Manifest:
    return Manifest(project="p", source="m.yaml", jobs=tuple(specs), hosts=hosts)


def test_a_job_waits_now_at_its_retry_time_or_not_at_all() -> None:
    assert due_at(state("a")) == -math.inf
    assert due_at(state("a", retry_at=1005.0)) == 1005.0  # a delayed retry
    assert due_at(state("a", JobStatus.FAILED_OOM, retry_at=1007.0)) == 1007.0
    assert due_at(state("a", JobStatus.FAILED_OOM)) is None  # an OOM not to be retried
    for status in (JobStatus.RUNNING, JobStatus.LAUNCHING, JobStatus.COMPLETED,
                   JobStatus.HELD, JobStatus.STUCK):
        assert due_at(state("a", status, retry_at=1.0)) is None, status


def test_what_a_job_asks_on_a_gpu_it_shares() -> None:
    assert share_need(state("a"), spec("a")) is None  # no mem_mib: its GPUs alone
    assert share_need(state("a"), spec("a", mem_mib=3000)) == 3000
    assert share_need(state("a"), spec("a", mem_mib=3000, exclusive=True)) is None
    # after a shared OOM: 1.5x, rounded up, never more than that
    assert share_need(state("a", mem_escalation=1), spec("a", mem_mib=3000)) == 4500
    assert share_need(state("a", mem_escalation=1), spec("a", mem_mib=3001)) == 4502
    assert share_need(state("a", mem_escalation=2), spec("a", mem_mib=3000)) is None  # alone
    # auto: not known before an attempt of its own had a peak, then learned from its highest
    auto = spec("a", mem_mib="auto")
    assert share_need(state("a"), auto) == -1
    job = state("a", history=[attempt(1, None), attempt(2, 2000), attempt(3, 3000),
                              attempt(4, 1000)])
    assert share_need(job, auto) == learned_estimate(3000)
    job.mem_escalation = 1
    assert share_need(job, auto) == math.ceil(learned_estimate(3000) * 1.5)
    job.history = [attempt(1, None), attempt(2, 0)]
    assert share_need(job, auto) == -1


def attempt(n: int, peak: int | None) -> Attempt:
    return Attempt(n=n, host="h", gpus=[0], session=f"s{n}", attempt_dir="d", log="l",
                   peak_mib=peak)


def need_of(specs: list[JobSpec], states: list[JobState], now: float = 1000.0,
            ) -> tuple[bool, WaitingNeed | None, float]:
    by_id = {s.id: s for s in specs}
    return waiting_need_until(manifest(specs), [(s, by_id.get(s.id)) for s in states], now)


def test_the_least_the_waiting_jobs_need_and_until_when_it_holds() -> None:
    specs = [spec("big", mem_mib=9000, gpus_per_job=3), spec("small", mem_mib=3000,
                                                              gpus_per_job=2),
             spec("alone", gpus_per_job=4), spec("cpu", gpus_per_job=0, mem_mib=10)]
    states = [state(s.id) for s in specs]
    assert need_of(specs, states) == (True, WaitingNeed(2, 3000 + MARGIN, THRESHOLD), math.inf)
    # the smallest of each, whichever job comes first
    assert need_of(specs[::-1], states[::-1]) == (True, WaitingNeed(2, 3000 + MARGIN,
                                                                    THRESHOLD), math.inf)
    assert need_of(specs, states[:1]) == (True, WaitingNeed(3, 9000 + MARGIN, None), math.inf)
    assert need_of(specs, [states[2]]) == (True, WaitingNeed(4, None, THRESHOLD), math.inf)
    # a CPU job, a running one, and a job with no definition wait for no GPU
    running = state("big", JobStatus.RUNNING)
    assert need_of(specs, [states[3], running, state("gone")]) == (False, None, math.inf)
    assert need_of(specs, [running, states[1]]) == (True, WaitingNeed(2, 3000 + MARGIN, None),
                                                    math.inf)
    # a retry still ahead: not waiting yet, and the need holds until it comes due
    later = [state("big", JobStatus.FAILED_OOM, retry_at=1030.0),
             state("small", retry_at=1020.0)]
    assert need_of(specs, later) == (False, None, 1020.0)
    assert need_of(specs, later, now=1020.0) == (True, WaitingNeed(2, 3000 + MARGIN, None),
                                                 1030.0)
    assert need_of(specs, [*later, states[2]]) == (True, WaitingNeed(4, None, THRESHOLD),
                                                   1020.0)
    # an `auto` job with nothing learned yet: the need is not known (any GPU it may use)
    auto = [*specs, spec("auto", mem_mib="auto", gpus_per_job=5)]
    assert need_of(auto, [*states, state("auto")]) == (True, None, math.inf)
    assert waiting_need(manifest(specs), [(states[0], specs[0])], 1000.0) == (
        True, WaitingNeed(3, 9000 + MARGIN, None))


GPUS = tuple(GpuReading(i, f"G{i}", "sim", 0, 24576, 0) for i in range(4))


def claim(gpu: int, user: str, project: str = "p", token: str = "t") -> GpuClaim:
    return GpuClaim(name=f"c{gpu}", gpu=gpu, user=user, project=project, token=token,
                    job=f"j{gpu}", attempt=1, pid=100 + gpu, mib=None, session=f"s{gpu}")


def probe(lab: HostLab | None, claims: tuple[GpuClaim, ...] = ()) -> HostSnapshot:
    return HostSnapshot(host="h", ok=True, taken_at=1000.0, gpus=GPUS, claims=claims, lab=lab)


def wants(tmp_path: Path, hosts: tuple[HostSpec, ...] = (HostSpec(name="h"),),
          jobs: list[JobState] | None = None, specs: list[JobSpec] | None = None,
          clock: Clock | None = None) -> Wants:
    ctx = context(tmp_path, manifest(specs or [spec("a", mem_mib=3000)], hosts),
                  jobs if jobs is not None else [state("a")], clock)
    return Wants(ctx, poll=lambda: 4.2)


def usable(want: Wants, snap: HostSnapshot | None, host: str = "h") -> frozenset[int] | None:
    want.ctx.hosts[host].snapshot = snap
    return want.usable(host)


def test_the_gpus_it_may_use_are_the_host_entrys_until_rules_say_otherwise(
        tmp_path: Path) -> None:
    want = wants(tmp_path, (HostSpec(name="h"), HostSpec(name="g", gpus=(0, 1, 3))))
    # no probe yet, a probe without the lab's rules, a rules file that is not rules
    for snap in (None, probe(None), probe(HostLab(rules=None, user="alice",
                                                  warning="not rules"))):
        assert usable(want, snap) is None  # all of them
        assert usable(want, snap, "g") == {0, 1, 3}
    rules = HostLab(rules=LabRules(keep_free={3: "demo"}, reserved={2: frozenset({"bob"})}),
                    user="alice")
    assert usable(want, probe(rules)) == {0, 1}
    assert usable(want, probe(rules), "g") == {0, 1}
    assert usable(want, probe(HostLab(rules=LabRules(), user="alice"))) == {0, 1, 2, 3}
    assert usable(want, probe(HostLab(rules=LabRules(), user="alice")), "g") == {0, 1, 3}


def test_at_a_users_gpu_cap_the_want_file_names_only_the_gpus_that_user_holds(
        tmp_path: Path) -> None:
    """max_gpus_per_user: 2, and bob's engine waits. alice holds GPUs 0 and 2 (one claim from
    another engine of hers): her waiting jobs may use those and no other, and the want file
    says so, or fair turns would hold GPU 1 for an engine that may not take it."""
    want = wants(tmp_path)
    cap = LabRules(max_gpus_per_user=2)
    waiting = frozenset({"bob"})
    held = (claim(0, "alice"), claim(2, "alice", project="other", token="x"),
            claim(1, "bob"), claim(3, "carol"))
    at_cap = probe(HostLab(rules=cap, user="alice", waiting=waiting), held)
    assert usable(want, at_cap) == {0, 2}
    assert want.arg("h") == "p:t:1:5:0,2:1:4024:-"
    # below the cap (bob's and carol's claims are not hers), or with nobody else waiting
    below = probe(HostLab(rules=cap, user="alice", waiting=waiting), held[:1] + held[2:])
    assert usable(want, below) == {0, 1, 2, 3}
    nobody = probe(HostLab(rules=cap, user="alice"), held)
    assert usable(want, nobody) == {0, 1, 2, 3}
    # at the cap with every GPU she holds kept free: none at all
    kept = LabRules(keep_free={0: "", 2: ""}, max_gpus_per_user=2)
    assert usable(want, probe(HostLab(rules=kept, user="alice", waiting=waiting), held)) \
        == frozenset()
    assert want.arg("h") == "p:t:1:5:none:1:4024:-"


def test_the_want_is_worked_out_once_per_change_of_the_jobs_or_a_retry_coming_due(
        tmp_path: Path) -> None:
    clock = Clock(1000.0)
    job = state("a", JobStatus.FAILED_OOM, retry_at=1010.0)
    want = wants(tmp_path, jobs=[job], clock=clock)
    ledger = want.ctx.ledger
    assert want.arg("h") == "p:t:0:5:all:-:-:-"
    clock.now = 1010.0  # its retry is due, though no job changed
    assert want.arg("h") == "p:t:1:5:all:1:4024:-"
    ledger.set_status(job, JobStatus.RUNNING)
    assert want.arg("h") == "p:t:0:5:all:-:-:-"
    ledger.set_status(job, JobStatus.PENDING)
    assert want.arg("h") == "p:t:1:5:all:1:4024:-"
    ledger.set_spec("a", spec("a", mem_mib=5000, gpus_per_job=2))  # edited: a new definition
    assert want.arg("h") == "p:t:1:5:all:2:6024:-"
    # nothing changed: the pass is not made again (a status set behind the ledger's back
    # is not seen until the next change)
    job.status = JobStatus.RUNNING
    assert want.arg("h") == "p:t:1:5:all:2:6024:-"


@pytest.mark.parametrize("poll", [0.2, 1.0, 59.01])
def test_the_poll_in_the_want_is_whole_seconds_at_least_one(tmp_path: Path,
                                                            poll: float) -> None:
    want = wants(tmp_path)
    want.poll = lambda: poll
    assert want.arg("h").split(":")[3] == str(max(1, math.ceil(poll)))


def test_a_want_whose_need_is_not_known_still_says_it_waits(tmp_path: Path) -> None:
    want = wants(tmp_path, specs=[spec("a", mem_mib="auto")])
    assert want.arg("h") == "p:t:1:5:all:-:-:-"
