"""Preemption's rule (decide/preemption.py) and its manifest keys, without hosts."""

from __future__ import annotations

import textwrap

import pytest

from eq_tui.api.model import Attempt, JobState
from eq_tui.cli.status_report import job_row
from eq_tui.engine.decide.preemption import (
    NO_PREEMPT,
    Gpu,
    Limits,
    Preemption,
    Running,
    Waiting,
    choose,
    reserved,
    settled,
)
from eq_tui.errors import ManifestError
from eq_tui.manifest import load_manifest_text

G80 = 80_000


def gpu(index: int, host: str = "a", *, others: int = 0, usable: bool = True,
        total: int | None = G80) -> Gpu:
    return Gpu(host, index, total, others, usable)


def run(job: str, gpus: tuple[int, ...] = (0,), *, priority: int = 0, started: float = 0.0,
        hold: int | None = None, contract: bool = True, host: str = "a", count: int = 0,
        most: int = 3) -> Running:
    return Running(job, host, gpus, priority, started, hold, contract, count, most)


def high(*, priority: int = 5, preempt: bool | str = True, gpus: int = 1,
         need: int | None = None) -> Waiting:
    return Waiting("high", priority, preempt, gpus, need)  # type: ignore[arg-type]


def test_a_lower_priority_job_with_a_contract_is_stopped_for_it() -> None:
    got = choose(high(), [gpu(0)], [run("low")])
    assert got == Preemption("high", "low", "a", (0,))
    assert got.reason() == "preempting low on a:0; then waits for its memory"


def test_no_preempt_key_no_preemption() -> None:
    assert choose(high(preempt=False), [gpu(0)], [run("low")]) == NO_PREEMPT


def test_equal_priority_never_preempts_and_one_less_does() -> None:
    assert choose(high(priority=0), [gpu(0)], [run("low", priority=0)]) == \
        "preempt: no running job of lower priority"
    assert isinstance(choose(high(priority=1), [gpu(0)], [run("low", priority=0)]), Preemption)
    assert isinstance(choose(high(priority=0), [gpu(0)], [run("low", priority=-1)]),
                      Preemption)


def test_no_contract_is_left_alone_unless_force() -> None:
    bare = [run("low", contract=False)]
    assert choose(high(), [gpu(0)], bare) == \
        "preempt: no running job of lower priority has a checkpoint contract"
    assert choose(high(preempt="force"), [gpu(0)], bare) == Preemption("high", "low", "a", (0,))


def test_max_preemptions_reached_is_left_alone() -> None:
    assert choose(high(), [gpu(0)], [run("low", count=3, most=3)]) == \
        "preempt: the jobs of lower priority were preempted their max_preemptions times"
    assert isinstance(choose(high(), [gpu(0)], [run("low", count=2, most=3)]), Preemption)
    assert isinstance(choose(high(), [gpu(0)], [run("low", count=0, most=0)]), str)


def test_lowest_priority_then_newest_started_then_id() -> None:
    gpus = [gpu(0), gpu(1), gpu(2)]
    jobs = [run("p1", (0,), priority=1, started=5), run("p0old", (1,), priority=0, started=1),
            run("p0new", (2,), priority=0, started=9)]
    assert choose(high(), gpus, jobs) == Preemption("high", "p0new", "a", (2,))
    tie = [run("b", (0,), started=3), run("a", (1,), started=3)]
    assert choose(high(), gpus[:2], tie).victim == "a"  # type: ignore[union-attr]
    # the lowest priority goes first even when it started before
    jobs = [run("p1", (0,), priority=1, started=9), run("p0", (1,), priority=0, started=1)]
    assert choose(high(), gpus[:2], jobs).victim == "p0"  # type: ignore[union-attr]


def test_a_victim_whose_stop_frees_too_little_on_a_shared_gpu_is_skipped() -> None:
    # GPU 0: small (10 GB) and big (60 GB) share it; high needs 30 GB
    jobs = [run("small", (0,), priority=0, started=9, hold=10_000),
            run("big", (0,), priority=1, started=1, hold=60_000)]
    got = choose(high(need=30_000), [gpu(0)], jobs)
    assert got == Preemption("high", "big", "a", (0,))
    # exactly enough: 80 - 50 (big) - 0 margin = 30 fits; with a margin of 1 it does not
    jobs = [run("small", (0,), hold=30_000), run("big", (0,), priority=1, hold=50_000)]
    assert choose(high(need=30_000), [gpu(0)], jobs).victim == "small"  # type: ignore[union-attr]
    # one MiB of margin: stopping small leaves 29 GB, so big (a higher priority) goes instead
    got = choose(high(need=30_000), [gpu(0)], jobs, limits=Limits(margin_mib=1))
    assert got == Preemption("high", "big", "a", (0,))
    assert choose(high(need=30_000), [gpu(0, others=31_000)], jobs) == \
        "preempt: no job of lower priority frees enough room for it (2 looked at)"


def test_other_peoples_memory_counts_against_the_room() -> None:
    jobs = [run("low", (0,), hold=40_000)]
    assert isinstance(choose(high(need=40_000), [gpu(0, others=0)], jobs), Preemption)
    assert isinstance(choose(high(need=40_000), [gpu(0, others=40_001)], jobs), str)
    # a job that wants its GPU alone needs it nearly empty of other people's memory too
    alone = [run("low", (0,))]
    assert isinstance(choose(high(), [gpu(0, others=999)], alone), Preemption)
    assert isinstance(choose(high(), [gpu(0, others=1000)], alone), str)


def test_a_gpu_alone_needs_no_other_job_of_ours_left_there() -> None:
    jobs = [run("low", (0,), hold=1000), run("keep", (0,), priority=9, hold=1000)]
    assert isinstance(choose(high(), [gpu(0)], jobs), str)
    # but a shared job fits beside the one that stays
    assert isinstance(choose(high(need=1000), [gpu(0)], jobs), Preemption)
    # and a GPU another job has alone is never shared
    jobs = [run("low", (0,), hold=1000), run("keep", (0,), priority=9)]
    assert isinstance(choose(high(need=1000), [gpu(0)], jobs), str)


def test_drained_unread_or_unknown_gpus_never_count() -> None:
    assert isinstance(choose(high(), [gpu(0, usable=False)], [run("low")]), str)
    assert isinstance(choose(high(), [gpu(0, total=None)], [run("low")]), str)
    assert isinstance(choose(high(), [gpu(0, host="b")], [run("low")]), str)
    assert isinstance(choose(high(), [], [run("low")]), str)


def test_it_must_fit_on_the_victims_host_and_use_what_the_victim_frees() -> None:
    # a free GPU on the victim's host that the job could already use is not the victim's
    assert isinstance(choose(high(), [gpu(1)], [run("low", (0,))]), str)
    # two GPUs wanted: the victim frees one, the host has another free: both, the freed first
    got = choose(high(gpus=2), [gpu(0), gpu(1), gpu(2)], [run("low", (1,))])
    assert got == Preemption("high", "low", "a", (0, 1))
    assert isinstance(choose(high(gpus=2), [gpu(1)], [run("low", (1,))]), str)
    # the victim's GPUs come first when more fit than are needed
    got = choose(high(), [gpu(0), gpu(1)], [run("low", (1,), hold=1000)], limits=Limits())
    assert got == Preemption("high", "low", "a", (1,))


def test_one_victim_at_a_time_and_the_reservation() -> None:
    flight = Preemption("high", "low", "a", (0,))
    jobs = [run("low", (0,)), run("other", (1,))]
    assert choose(high(), [gpu(0), gpu(1)], jobs, [flight]) == flight.reason()
    # another preemptor neither takes the same victim nor the reserved GPU
    other = Waiting("second", 5, True, 1, None)
    got = choose(other, [gpu(0), gpu(1)], jobs, [flight])
    assert got == Preemption("second", "other", "a", (1,))
    assert isinstance(choose(other, [gpu(0)], [run("low", (0,)), run("x", (0,), hold=5)],
                             [flight]), str)
    assert reserved([flight, Preemption("s", "v", "b", (2, 3))]) == {
        ("a", 0): "high", ("b", 2): "s", ("b", 3): "s"}


def test_settled_keeps_a_preemption_until_the_victim_stopped_and_the_preemptor_started() -> None:
    flight = Preemption("high", "low", "a", (0,))
    assert settled([flight], ["low"], ["high"]) == [flight]
    assert settled([flight], [], ["high"]) == [flight]  # victim gone: GPU kept for high
    assert settled([flight], ["low"], []) == [flight]  # victim still in its grace
    assert settled([flight], [], []) == []


MANIFEST = """\
    project: p
    hosts: [{name: a, gpus: [0]}]
    checkpoint: {path: "ckpt/${id}/*.pt", resume: "--resume {checkpoint}"%s}
    jobs:
      - {id: low, cmd: "echo low"%s}
      - {id: high, cmd: "echo high", priority: 5, preempt: true}
"""


def load(ckpt: str = "", low: str = "") -> object:
    return load_manifest_text(textwrap.dedent(MANIFEST % (ckpt, low)))


def test_manifest_keys_defaults_and_values() -> None:
    manifest = load()
    low, top = manifest.jobs  # type: ignore[attr-defined]
    assert (low.preempt, low.max_preemptions, low.retry_lost) == (False, 3, 1)
    assert top.preempt is True
    assert (low.checkpoint.signal, low.checkpoint.grace) == ("TERM", 60.0)
    low = load(", signal: SIGusr1, grace: 5", ", preempt: force, max_preemptions: 0, "
               "retry_lost: 4").jobs[0]  # type: ignore[attr-defined]
    assert (low.preempt, low.max_preemptions, low.retry_lost) == ("force", 0, 4)
    assert (low.checkpoint.signal, low.checkpoint.grace) == ("USR1", 5.0)
    # false said out loud (a phase's true turned off for one job), and no requeue of a lost job
    low = load("", ", preempt: false, retry_lost: 0").jobs[0]  # type: ignore[attr-defined]
    assert (low.preempt, low.retry_lost) == (False, 0)


def test_a_bad_preempt_says_what_it_may_be() -> None:
    with pytest.raises(ManifestError) as err:
        load("", ", preempt: forced")
    assert "must be true, false or force, not 'forced'" in str(err.value)


@pytest.mark.parametrize(("ckpt", "low", "where"), [
    (", signal: NOPE", "", "checkpoint.signal"),
    (", signal: KILL", "", "checkpoint.signal"),
    (", grace: -1", "", "checkpoint.grace"),
    (", grace: 86401", "", "checkpoint.grace"),
    ("", ", preempt: forced", "jobs[0].preempt"),
    ("", ", max_preemptions: -1", "jobs[0].max_preemptions"),
    ("", ", retry_lost: x", "jobs[0].retry_lost"),
    ("", ", retry_lost: -1", "jobs[0].retry_lost"),
])
def test_bad_keys_name_their_path(ckpt: str, low: str, where: str) -> None:
    with pytest.raises(ManifestError) as err:
        load(ckpt, low)
    assert err.value.key_path == where


def test_a_gpu_kept_for_another_preemptor_is_not_taken_even_once_its_victim_stopped() -> None:
    kept = Preemption("first", "gone", "a", (0,))  # its victim stopped; first not started yet
    jobs = [run("x", (0,), hold=70_000)]
    second = Waiting("second", 5, True, 1, 20_000)
    assert isinstance(choose(second, [gpu(0)], jobs, [kept]), str)
    assert choose(second, [gpu(0)], jobs) == Preemption("second", "x", "a", (0,))


def test_a_victim_already_being_stopped_is_never_chosen_twice() -> None:
    flight = Preemption("first", "low", "a", (0,))
    second = Waiting("second", 5, True, 1, None)
    assert choose(second, [gpu(0), gpu(1)], [run("low", (0, 1))], [flight]) == \
        "preempt: no running job of lower priority"


def test_jobs_on_other_hosts_take_no_room_on_the_victims() -> None:
    jobs = [run("low", (0,), hold=70_000),
            run("far", (0,), host="b", priority=9, hold=70_000)]
    assert choose(high(need=20_000), [gpu(0)], jobs) == Preemption("high", "low", "a", (0,))


def test_a_preempted_job_waiting_says_by_whom_in_its_status_row() -> None:
    job = JobState(id="low", phase="main", cmd="x")
    job.history.append(Attempt(1, "a", [0], "s", "/d", "/l", preempted_by="high"))
    row = job_row(job, "waiting for a free GPU")
    assert row["preempted_by"] == "high"
    assert row["reason"] == "preempted by high; waiting for a free GPU"
    job.history.append(Attempt(2, "a", [0], "s2", "/d2", "/l2"))
    assert job_row(job)["preempted_by"] is None


def test_a_victim_on_several_gpus_is_named_with_all_of_them() -> None:
    got = choose(high(gpus=2), [gpu(0), gpu(1)], [run("low", (0, 1))])
    assert isinstance(got, Preemption)
    assert got.reason() == "preempting low on a:0,1; then waits for its memory"


def test_force_with_only_jobs_at_their_max_says_so_not_that_they_lack_a_contract() -> None:
    spent = [run("low", contract=False, count=3)]
    assert choose(high(preempt="force"), [gpu(0)], spent) == \
        "preempt: the jobs of lower priority were preempted their max_preemptions times"
    assert choose(high(), [gpu(0)], spent) == \
        "preempt: no running job of lower priority has a checkpoint contract"


def test_every_other_packed_job_left_on_the_gpu_counts_against_the_room() -> None:
    """Two jobs of ours stay packed beside the victim: both their holds are taken off the room,
    not only the last one's; with no other job there, exactly the room left fits."""
    stay = [run("p1", hold=30_000, priority=9), run("p2", hold=30_000, priority=9)]
    victim = run("low", hold=10_000)
    assert choose(high(need=20_001), [gpu(0)], [*stay, victim]) == \
        "preempt: no job of lower priority frees enough room for it (1 looked at)"
    assert isinstance(choose(high(need=20_000), [gpu(0)], [*stay, victim]), Preemption)
    exact = G80 - 1_000 - 500
    assert isinstance(choose(high(need=exact), [gpu(0, others=1_000)],
                             [run("low", hold=10_000)], limits=Limits(margin_mib=500)),
                      Preemption)
    assert not isinstance(choose(high(need=exact + 1), [gpu(0, others=1_000)],
                                 [run("low", hold=10_000)], limits=Limits(margin_mib=500)),
                          Preemption)
