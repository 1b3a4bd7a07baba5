"""The engine's side of GPU claims (hosts/claims.py), fed what a probe and a launch carry
(tests/integration/test_claims_host.py runs the real scripts): reading the probe's claims, the
launch's and the probe's arguments, why a launch was refused, and what other engines' claims
hold on a GPU beyond what their jobs use already.

A claim is held by its attempt's wrapper, which leads the job's process group and its session.
A job's process may leave either: one that starts its own process group (a launcher, `set -m`,
`os.setpgrp()`) stays in the wrapper's session; so the fixtures here give the processes a
group and a session that differ, and the claim is told apart by each."""

from __future__ import annotations

from dataclasses import replace

from eq_tui.hosts.base import GpuProcess, GpuReading
from eq_tui.hosts.claims import (
    ClaimTicket,
    GpuClaim,
    WaitingNeed,
    by_gpu,
    known_on,
    launch_args,
    others,
    parse_claims,
    pending_by_gpu,
    refusal,
    usage_of,
    want_arg,
)

WRAPPER = 5100  # the claim's process: the attempt's wrapper
GPUS = (GpuReading(0, "GPU-a", "Sim", 0, 8000, 0), GpuReading(1, "GPU-b", "Sim", 0, 8000, 0))


def claim(gpu: int = 0, mib: int | None = 3000, *, pid: int = WRAPPER, name: str = "c",
          project: str = "q", token: str = "beef01") -> GpuClaim:
    return GpuClaim(name=name, gpu=gpu, user="bob", project=project, token=token, job="j",
                    attempt=1, pid=pid, mib=mib, session="eq_q_beef01_j_a1")


def proc(uuid: str, mib: int | None, *, pgid: int | None, sid: int | None,
         pid: int = 5200) -> GpuProcess:
    return GpuProcess(pid, uuid, mib, pgid=pgid, sid=sid)


def test_the_probes_claim_lines_are_read_and_anything_else_skipped() -> None:
    line = "c.1.bob.q.beef01.j.a2 1 bob q beef01 j 2 4242 - eq_q_beef01_j_a2"
    shared = "c.0.amy.p.t1.k.a1 0 amy p t1 k 1 77 2500 eq_p_t1_k_a1"
    assert parse_claims([line, shared]) == (
        GpuClaim("c.1.bob.q.beef01.j.a2", 1, "bob", "q", "beef01", "j", 2, 4242, None,
                 "eq_q_beef01_j_a2"),
        GpuClaim("c.0.amy.p.t1.k.a1", 0, "amy", "p", "t1", "k", 1, 77, 2500, "eq_p_t1_k_a1"))
    fields = line.split()
    broken = [" ".join(fields[:9]), line + " extra", "",
              *(" ".join([*fields[:i], "x", *fields[i + 1:]]) for i in (1, 6, 7, 8)),
              " ".join([*fields[:8], "-1", *fields[9:]])]
    assert parse_claims([*broken, shared]) == parse_claims([shared])


def test_a_claim_is_mine_only_with_my_project_and_my_token() -> None:
    mine = claim(project="p", token="t")
    assert mine.mine("p", "t")
    assert not mine.mine("p", "u") and not mine.mine("q", "t")
    assert mine.who == "bob's p/j"
    theirs = [claim(project="p", token="u"), claim(project="q", token="t")]
    assert others([mine, *theirs], "p", "t") == theirs


def test_launch_arguments_carry_the_ticket_and_the_hosts_paths() -> None:
    ticket = ClaimTicket("p", "t1", None)
    assert launch_args(ticket, None, "j", 2, (0, 3)) == [
        "-", "p", "t1", "j", "2", "0,3", "-", "-", "-", "?", "-"]
    full = ClaimTicket("p", "t1", 2500, known=("c.0.a", "c.0.b"), rules_sum="123.45",
                       max_gpus=2)
    assert launch_args(full, "/scratch/claims", "j", 1, (1,), rules="/etc/r.yaml") == [
        "/scratch/claims", "p", "t1", "j", "1", "1", "2500", "c.0.a,c.0.b", "/etc/r.yaml",
        "123.45", "2"]
    assert launch_args(replace(full, rules_sum="-"), None, "j", 1, (1,))[9] == "-"
    assert launch_args(ticket, None, "j", 1, ()) == []  # a job without GPUs claims nothing
    assert launch_args(None, "/c", "j", 1, (0,)) == []


def test_the_want_argument_says_waiting_poll_gpus_and_need() -> None:
    assert want_arg("p", "t", waiting=True, poll_s=2.0, gpus=None) == "p:t:1:2:all:-:-:-"
    assert want_arg("p", "t", waiting=False, poll_s=0.2, gpus=[3, 1]) == "p:t:0:1:1,3:-:-:-"
    assert want_arg("p", "t", waiting=True, poll_s=2.5, gpus=[]) == "p:t:1:3:none:-:-:-"
    need = WaitingNeed(count=2, share_mib=4000, alone_below_mib=None)
    assert want_arg("p", "t", waiting=True, poll_s=1, gpus=None, need=need) == \
        "p:t:1:1:all:2:4000:-"
    assert want_arg("p", "t", waiting=True, poll_s=1, gpus=None,
                    need=WaitingNeed(alone_below_mib=500)) == "p:t:1:1:all:1:-:500"
    assert WaitingNeed() == WaitingNeed(1, None, None)


def test_a_refusal_is_read_from_the_launchs_stderr() -> None:
    stderr = ("some noise\n"
              "eq-tui: claim refused: GPU 0 is claimed by bob's q/j  \n"
              "eq-tui: claim refused: a second line\n")
    assert refusal(stderr) == "GPU 0 is claimed by bob's q/j"
    assert refusal("launch.sh: line 3: eq-tui: claim refused: fair turn: x") == "fair turn: x"
    assert refusal("eq-tui: attempt dir exists\n") is None
    assert refusal("") is None


def test_a_claims_usage_counts_its_group_and_its_session_apart() -> None:
    """A job process in its own group but the wrapper's session is the claim's; so is one in
    the wrapper's group in a session it does not lead; a process in neither is someone else's,
    whatever else it shares."""
    c = claim(0)
    assert usage_of(c, GPUS, [proc("GPU-a", 1000, pgid=WRAPPER, sid=WRAPPER)]) == 1000
    assert usage_of(c, GPUS, [proc("GPU-a", 1200, pgid=5300, sid=WRAPPER)]) == 1200
    assert usage_of(c, GPUS, [proc("GPU-a", 1400, pgid=WRAPPER, sid=5300)]) == 1400
    assert usage_of(c, GPUS, [proc("GPU-a", 1600, pgid=5300, sid=5301, pid=WRAPPER)]) == 0
    assert usage_of(c, GPUS, [proc("GPU-a", 1800, pgid=None, sid=None)]) == 0
    processes = [proc("GPU-a", 1000, pgid=5300, sid=WRAPPER),
                 proc("GPU-a", 500, pgid=WRAPPER, sid=5300, pid=5201),
                 proc("GPU-a", None, pgid=WRAPPER, sid=WRAPPER, pid=5202),  # no reading yet
                 proc("GPU-b", 700, pgid=WRAPPER, sid=WRAPPER, pid=5203),  # another GPU
                 proc("GPU-a", 900, pgid=6000, sid=6000, pid=6001)]  # another user's
    assert usage_of(c, GPUS, processes) == 1500
    assert usage_of(claim(1), GPUS, processes) == 700
    assert usage_of(claim(2), GPUS, processes) == 0  # a GPU the probe did not list


def test_pending_is_what_other_engines_claims_hold_beyond_their_usage() -> None:
    own_group = proc("GPU-a", 1000, pgid=5300, sid=WRAPPER)
    assert pending_by_gpu([claim(0, 3000)], GPUS, [own_group]) == {0: 2000}
    # two claims on one GPU add up; usage beyond the estimate holds nothing more
    second = claim(0, 2000, pid=WRAPPER + 50)
    over = proc("GPU-a", 2500, pgid=WRAPPER + 50, sid=9999, pid=5400)
    assert pending_by_gpu([claim(0, 3000), second], GPUS, [own_group, over]) == {0: 2000}
    # a claim on the whole GPU: None, whatever is claimed beside it, before or after
    whole = claim(0, None, pid=7000)
    assert pending_by_gpu([claim(0, 3000), whole, second], GPUS, [own_group]) == {0: None}
    assert pending_by_gpu([whole, claim(0, 3000)], GPUS, []) == {0: None}
    assert pending_by_gpu([claim(0, 3000), claim(1, 1500)], GPUS, [own_group]) == {
        0: 2000, 1: 1500}
    assert pending_by_gpu([], GPUS, []) == {}
    # a whole-GPU claim ends nothing but its GPU's count: the claims after it still count
    assert pending_by_gpu([whole, claim(0, 3000), claim(1, 1500)], GPUS, []) == {
        0: None, 1: 1500}


def test_claims_by_gpu_and_by_name() -> None:
    a, b, c = claim(0, name="c.0.b"), claim(1, name="c.1.x"), claim(0, name="c.0.a")
    assert known_on([a, b, c], (0,)) == ("c.0.a", "c.0.b")
    assert known_on([a, b, c], [1, 0]) == ("c.0.a", "c.0.b", "c.1.x")
    assert known_on([a, b, c], ()) == ()
    assert by_gpu([a, b, c]) == {0: [a, c], 1: [b]}
