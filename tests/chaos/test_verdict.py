"""The chaos verdict can fail: each check, fed host records that break its promise, says so."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.chaos.host_records import refused_writes
from tests.chaos.traces import (
    DroppedConnection,
    HostRecords,
    RefusedWrite,
    attempts_of,
    dropped_connections,
    fault_trace,
)
from tests.chaos.verdict import (
    EngineKill,
    Fault,
    StateRecovery,
    completed_proof,
    double_bookings,
    duplicates,
    explain_retries,
    gpu_overlaps,
    host_runs,
    stuck_proof,
)
from tests.support.sshbed import SSHD_STARTED


def start(job: str, t: float, *, pid: int, gpu: int = 0, attempt: int = 1) -> dict[str, Any]:
    return {"event": "start", "job": job, "attempt": attempt, "pid": pid, "gpu": gpu, "t": t,
            "exec_t": t - 0.05}


def end(job: str, t: float, *, pid: int, gpu: int = 0, attempt: int = 1, code: int = 0,
        linger: float | None = None) -> dict[str, Any]:
    return {"event": "end", "job": job, "attempt": attempt, "pid": pid, "gpu": gpu, "t": t,
            "exit": code, "linger_until": linger}


def test_a_start_while_the_previous_memory_lingers_is_an_overlap_only_against_release() -> None:
    records = [start("a", 10, pid=1), end("a", 20, pid=1, linger=20.5),
               start("b", 20.3, pid=2), end("b", 30, pid=2)]
    runs = host_runs("h", records, [], now=100)
    by_release, margin = gpu_overlaps(runs, released=True)
    assert len(by_release) == 1 and "b/a1" in by_release[0] and "a/a1" in by_release[0]
    assert margin is not None and margin < 0
    assert gpu_overlaps(runs, released=False)[0] == []


def test_a_start_after_release_is_no_overlap_and_sets_the_margin() -> None:
    records = [start("a", 10, pid=1), end("a", 20, pid=1, linger=20.5),
               start("b", 20.65, pid=2), end("b", 30, pid=2)]
    found, margin = gpu_overlaps(host_runs("h", records, [], now=100), released=True)
    assert found == [] and margin is not None and abs(margin - 0.1) < 1e-9


def test_an_oom_on_a_held_gpu_is_an_overlap() -> None:
    records = [start("a", 10, pid=1), {"event": "oom", "job": "b", "attempt": 1, "pid": 2,
                                       "gpu": 0, "t": 12}, end("a", 20, pid=1)]
    assert len(gpu_overlaps(host_runs("h", records, [], now=100), released=True)[0]) == 1


def test_a_start_without_end_holds_its_gpu_until_the_check_or_its_reboot() -> None:
    records = [start("a", 10, pid=1), start("b", 50, pid=2), end("b", 60, pid=2)]
    unexplained = host_runs("h", records, [], now=100)
    assert {r.job: r.ended_by for r in unexplained} == {"a": "check", "b": "record"}
    assert len(gpu_overlaps(unexplained, released=True)[0]) == 1
    rebooted = host_runs("h", records, [30.0], now=100)
    assert next(r for r in rebooted if r.job == "a").end == 30.0
    assert gpu_overlaps(rebooted, released=True)[0] == []


def test_a_reused_pid_does_not_pair_two_processes() -> None:
    records = [start("a", 10, pid=7), start("b", 11, pid=7, gpu=1), end("a", 20, pid=7)]
    runs = {r.job: r for r in host_runs("h", records, [], now=100)}
    assert runs["a"].end == 20 and runs["b"].ended_by == "check"


def test_an_attempt_started_twice_and_two_attempts_at_once_are_duplicates() -> None:
    twice = host_runs("h", [start("a", 10, pid=1), end("a", 11, pid=1),
                            start("a", 12, pid=2, gpu=1), end("a", 13, pid=2, gpu=1)], [], 100)
    assert duplicates(twice) == ["a/a1 started 2 times"]
    at_once = host_runs("h", [start("a", 10, pid=1), start("a", 12, pid=2, gpu=1, attempt=2),
                              end("a", 13, pid=2, gpu=1, attempt=2), end("a", 14, pid=1)],
                        [], 100)
    assert len(duplicates(at_once)) == 1
    one_after_other = host_runs("h", [start("a", 10, pid=1), end("a", 11, pid=1, code=1),
                                      start("a", 12, pid=2, attempt=2),
                                      end("a", 13, pid=2, attempt=2)], [], 100)
    assert duplicates(one_after_other) == []


def test_a_job_without_an_exit_0_run_or_its_output_is_not_proven_complete() -> None:
    failed = host_runs("h", [start("a", 10, pid=1), end("a", 11, pid=1, code=1)], [], 100)
    assert completed_proof("a", failed, {"attempt": 1}, needs_output=True)
    ok = host_runs("h", [start("a", 10, pid=1), end("a", 11, pid=1)], [], 100)
    assert completed_proof("a", ok, None, needs_output=True)
    assert completed_proof("a", ok, {"attempt": 2}, needs_output=True)
    assert completed_proof("a", ok, {"attempt": 1}, needs_output=True) is None
    assert completed_proof("a", ok, None, needs_output=False) is None
    assert completed_proof("a", [], None, needs_output=False)


def test_a_stuck_class_needs_its_failure_on_a_host() -> None:
    ok = host_runs("h", [start("a", 10, pid=1), end("a", 11, pid=1)], [], 100)
    assert stuck_proof("a", ok, "cuda_oom")
    assert stuck_proof("a", ok, "exit_nonzero")
    assert stuck_proof("a", ok, "output_missing")
    assert stuck_proof("a", ok, "lost") is None
    oom = host_runs("h", [{"event": "oom", "job": "a", "attempt": 1, "pid": 1, "gpu": 0,
                           "t": 5}], [], 100)
    assert stuck_proof("a", oom, "cuda_oom") is None


def test_an_oom_during_the_ramp_ends_its_own_run_and_is_no_launch_of_its_own() -> None:
    ramp_oom = {"event": "oom", "job": "a", "attempt": 1, "pid": 1, "gpu": 0, "t": 12,
                "during": "ramp", "held_mib": 9000, "asked_mib": 700}
    runs = host_runs("h", [start("a", 10, pid=1), ramp_oom, end("a", 12.01, pid=1, code=1)],
                     [], 100)
    assert [(r.job, r.oom, r.exit, r.end) for r in runs] == [("a", True, 1, 12.01)]
    assert duplicates(runs) == [] and gpu_overlaps(runs, released=True)[0] == []
    assert stuck_proof("a", runs, "cuda_oom") is None


def kill(pid: int = 42, *, status: int | None = -9, lock_at_kill: str = "42\n",
         successor: int | None = 43, lock_after: str = "43\n") -> Fault:
    return Fault("kill9", None, 10.0, 11.0, pid=pid,
                 kill=EngineKill(status, lock_at_kill, successor, lock_after))


def test_a_kill9_counts_when_the_os_reaped_the_lock_holder_by_sigkill_and_another_took_over(
        ) -> None:
    assert fault_trace(kill(), HostRecords()) == (
        "engine pid 42 reaped by SIGKILL holding engine.lock; pid 43 took the lock")
    assert fault_trace(kill(status=0), HostRecords()) is None  # it had exited by itself
    assert fault_trace(kill(status=-15), HostRecords()) is None
    assert fault_trace(kill(lock_at_kill="41\n"), HostRecords()) is None  # not the queue's
    assert fault_trace(kill(lock_at_kill=""), HostRecords()) is None
    assert fault_trace(kill(lock_after="42\n"), HostRecords()) is None  # nobody took over
    assert fault_trace(kill(successor=None), HostRecords()) is None
    assert fault_trace(Fault("kill9", None, 10.0, 11.0, pid=42), HostRecords()) is None


def sshd_lines(*, closed: str | None = None, restarted: float = 12.5) -> list[str]:
    lines = [f"{SSHD_STARTED}1.000000", "Server listening on 127.0.0.1 port 2222.",
             'Connection from 127.0.0.1 port 5001 on 127.0.0.1 port 2222 rdomain ""',
             "Accepted publickey for eqtest from 127.0.0.1 port 5001 ssh2: ED25519 SHA256:x",
             "User child is on pid 77",
             "Starting session: forced-command (config) '/b/count.sh' for eqtest from "
             "127.0.0.1 port 5001 id 0",
             'Connection from 127.0.0.1 port 5002 on 127.0.0.1 port 2222 rdomain ""',
             "Accepted publickey for eqtest2 from 127.0.0.1 port 5002 ssh2: ED25519 SHA256:x",
             "Received disconnect from 127.0.0.1 port 5002:11: Disconnected by application",
             "Disconnected from user eqtest2 127.0.0.1 port 5002"]
    if closed:
        lines.append(closed)
    return [*lines, f"{SSHD_STARTED}{restarted:.6f}", "Server listening on 127.0.0.1 port 2222.",
            "Accepted publickey for eqtest from 127.0.0.1 port 5003 ssh2: ED25519 SHA256:x"]


def test_a_cut_counts_only_with_a_live_connection_its_sshd_dropped() -> None:
    cut = Fault("cut_host", "alpha", 10.0, 13.0)
    dropped = HostRecords(sshd_logs={"alpha": sshd_lines()})
    assert dropped_connections(sshd_lines()) == [DroppedConnection("eqtest", 5001, 1.0, 12.5)]
    assert fault_trace(cut, dropped) == (
        "alpha: sshd dropped 1 live connection(s) (eqtest port 5001)")
    assert fault_trace(Fault("cut_host", "beta", 10.0, 13.0), dropped) is None
    assert fault_trace(cut, HostRecords(sshd_logs={"alpha": sshd_lines(restarted=30)})) is None
    assert fault_trace(cut, HostRecords(sshd_logs={"alpha": sshd_lines(restarted=9)})) is None
    for close in ("Connection closed by 127.0.0.1 port 5001",
                  "Read error from remote host 127.0.0.1 port 5001: Connection reset by peer",
                  "Timeout, client not responding from user eqtest 127.0.0.1 port 5001",
                  "Disconnected from user eqtest 127.0.0.1 port 5001"):
        assert fault_trace(cut, HostRecords(sshd_logs={"alpha": sshd_lines(closed=close)})) \
            is None, close
    assert fault_trace(cut, HostRecords()) is None


def test_a_full_disk_counts_only_with_a_record_of_ours_it_refused_there_and_then() -> None:
    disk = Fault("disk_full", "beta", 10.0, 14.0)
    refused = {"beta": [RefusedWrite("/logs-beta/p/job1/a1/cmd", 12.0)]}
    assert fault_trace(disk, HostRecords(refused_writes=refused)) == (
        "beta: 1 record(s) left empty: /logs-beta/p/job1/a1/cmd")
    assert fault_trace(Fault("disk_full", "alpha", 10.0, 14.0),
                       HostRecords(refused_writes=refused)) is None
    assert fault_trace(Fault("disk_full", "beta", 20.0, 24.0),
                       HostRecords(refused_writes=refused)) is None
    assert fault_trace(disk, HostRecords()) is None


def test_refused_writes_are_the_attempt_records_found_empty(tmp_path: Path) -> None:
    attempt = tmp_path / "proj" / "job1" / "a1"
    attempt.mkdir(parents=True)
    (attempt / "claims").write_text("0:3000\n")
    (attempt / "cmd").touch()  # created, its bytes refused
    (attempt / "log").touch()  # a job may print nothing: an empty log proves nothing
    (attempt / "exit.tmp").touch()
    (tmp_path / "filler").touch()  # not an attempt record
    found = refused_writes(tmp_path)
    assert sorted(Path(w.path).name for w in found) == ["cmd", "exit.tmp"]
    assert refused_writes(tmp_path, since=found[-1].t + 60) == []


def test_a_reboot_counts_only_with_runs_of_that_host_it_killed() -> None:
    reboot = Fault("reboot", "alpha", 10.0, 10.5)
    killed = host_runs("alpha", [start("a", 5, pid=1)], [10.0], 100)
    assert fault_trace(reboot, HostRecords(runs=killed)) == (
        "1 run(s) on alpha killed, 0 attempt wrapper(s)")
    wide = host_runs("alpha", [packed_start("a", 5, pid=1, mib=100, gpus=[0, 1])], [10.0], 100)
    assert fault_trace(reboot, HostRecords(runs=wide)) == (  # one process on two GPUs
        "1 run(s) on alpha killed, 0 attempt wrapper(s)")
    ended = host_runs("alpha", [start("a", 5, pid=1), end("a", 8, pid=1)], [10.0], 100)
    assert fault_trace(reboot, HostRecords(runs=ended)) is None
    unexplained = host_runs("alpha", [start("a", 5, pid=1)], [], 100)
    assert fault_trace(reboot, HostRecords(runs=unexplained)) is None
    elsewhere = host_runs("beta", [start("a", 5, pid=1)], [10.0], 100)
    assert fault_trace(reboot, HostRecords(runs=elsewhere)) is None
    # a job between its launch and its GPU claim: only its wrapper was there to kill
    wrappers = attempts_of([["SCREEN", "-dmS", "eq-x", "sh", "/l/p/job1/a1/run.sh",
                             "/l/p/job1/a1"], ["sh", "/l/p/job1/a1/run.sh", "/l/p/job1/a1"],
                            ["sleep", "600"], ["sh"]])
    assert wrappers == ("/l/p/job1/a1",)
    assert fault_trace(replace(reboot, sessions_killed=wrappers), HostRecords()) == (
        "0 run(s) on alpha killed, 1 attempt wrapper(s)")
    assert fault_trace(reboot, HostRecords()) is None


def recovery(**changes: Any) -> Fault:
    state = StateRecovery(parses_after=False, good_generation=40,
                          good_completed=frozenset({"job001"}), recovered_generation=41,
                          recovered_completed=frozenset({"job001", "job002"}))
    return Fault("corrupt_state", None, 1, 2, recovery=replace(state, **changes))


def test_a_corrupt_state_counts_when_its_bytes_stayed_broken_and_the_good_copy_was_taken_up(
        ) -> None:
    assert fault_trace(recovery(), HostRecords()) is not None
    assert fault_trace(recovery(parses_after=True), HostRecords()) is None  # not corrupted
    assert fault_trace(recovery(recovered_generation=40), HostRecords()) is None
    assert fault_trace(recovery(recovered_generation=None), HostRecords()) is None
    assert fault_trace(recovery(good_generation=None), HostRecords()) is None
    assert fault_trace(recovery(recovered_completed=frozenset({"job002"})),
                       HostRecords()) is None  # started over, not from the copy
    assert fault_trace(Fault("corrupt_state", None, 1, 2), HostRecords()) is None


def test_jobs_retried_by_hand_are_bounded_by_the_faults_that_explain_them() -> None:
    reboot = Fault("reboot", "alpha", 100.0, 101.0)
    victims = {f"j{i}": ("lost", "alpha", 105.0 + i) for i in range(3)}
    assert explain_retries(victims, [reboot], per_fault=4) == []
    assert len(explain_retries(victims, [reboot], per_fault=2)) == 1
    assert len(explain_retries({"j": ("lost", "beta", 105.0)}, [reboot], per_fault=4)) == 1
    assert len(explain_retries({"j": ("disk_full", "alpha", 105.0)}, [reboot], 4)) == 1
    assert len(explain_retries({"j": ("lost", "alpha", 5.0)}, [reboot], per_fault=4)) == 1


def test_a_clean_run_without_enough_effective_faults_is_no_verdict() -> None:
    from collections import Counter

    from tests.chaos.verdict import Verdict

    clean = Verdict(jobs=10, min_effective=10, min_kinds=5)
    clean.faults_effective = Counter({"kill9": 5, "corrupt_state": 1})  # host faults missed
    assert not clean.enough_evidence and not clean.ok
    clean.faults_effective = Counter({"kill9": 4, "corrupt_state": 2, "cut_host": 2,
                                      "reboot": 1, "disk_full": 1})
    assert clean.enough_evidence and clean.ok
    clean.idle_faults = 1  # one fault met no running job
    assert not clean.ok and clean.to_json()["enough_evidence"] is False
    weak = Verdict(jobs=10, min_effective=10, min_kinds=5)
    weak.faults_effective = Counter({"kill9": 12})  # many of one kind
    assert not weak.ok
    broken = Verdict(jobs=10, min_effective=1, min_kinds=1, lost=1)
    broken.faults_effective = Counter({"kill9": 1})
    assert broken.enough_evidence and not broken.ok


def packed_start(job: str, t: float, *, pid: int, mib: int, gpus: list[int] | None = None
                 ) -> dict[str, Any]:
    gpus = gpus or [0]
    return {**start(job, t, pid=pid, gpu=gpus[0]), "gpus": gpus, "peak_mib": mib}


def test_packed_jobs_share_a_gpu_while_their_memory_fits_and_not_beyond() -> None:
    records = [packed_start("a", 10, pid=1, mib=10000), packed_start("b", 11, pid=2, mib=10000),
               packed_start("c", 12, pid=3, mib=6000), end("a", 20, pid=1), end("b", 20, pid=2),
               end("c", 20, pid=3)]
    runs = host_runs("h", records, [], now=100)
    packed = frozenset({"a", "b", "c"})
    fits, _ = gpu_overlaps(runs, released=True, packed=packed, capacity_mib={"h": 26000})
    assert fits == []
    over, _ = gpu_overlaps(runs, released=True, packed=packed, capacity_mib={"h": 24576})
    assert len(over) == 1 and "c/a1" in over[0] and "26000 MiB of packed jobs" in over[0]
    # a job that did not declare its memory wants its GPU alone while it runs: sharing with it
    # is an overlap; once it has exited, its lingering memory only counts against the GPU
    alone, _ = gpu_overlaps(runs, released=True, packed=frozenset({"a", "c"}),
                            capacity_mib={"h": 80000})
    assert len(alone) == 2
    lingering = host_runs("h", [start("x", 10, pid=1), end("x", 20, pid=1, linger=21),
                                packed_start("p", 20.5, pid=2, mib=6000), end("p", 30, pid=2)],
                          [], 100)
    assert gpu_overlaps(lingering, released=True, packed=frozenset({"p"}),
                        capacity_mib={"h": 24576})[0] == []
    assert len(gpu_overlaps(lingering, released=True, packed=frozenset({"p"}),
                            capacity_mib={"h": 4000})[0]) == 1


def test_a_multi_gpu_run_holds_each_of_its_gpus() -> None:
    records = [packed_start("wide", 10, pid=1, mib=1000, gpus=[0, 1]),
               start("narrow", 12, pid=2, gpu=1), end("wide", 20, pid=1, gpu=0),
               end("narrow", 21, pid=2, gpu=1)]
    runs = host_runs("h", records, [], now=100)
    assert sorted(r.gpu for r in runs if r.job == "wide") == [0, 1]
    found, _ = gpu_overlaps(runs, released=True)
    assert len(found) == 1 and found[0].startswith("h GPU 1: narrow/a1")


def test_a_job_run_again_after_it_succeeded_is_a_duplicate() -> None:
    again = host_runs("h", [start("a", 10, pid=1), end("a", 11, pid=1),
                            start("a", 20, pid=2, attempt=2), end("a", 21, pid=2, attempt=2)],
                      [], 100)
    assert duplicates(again) == ["a: ran again after a1 succeeded"]


def test_a_rerun_after_success_is_excused_only_by_a_fault_that_hides_an_exit() -> None:
    from tests.chaos.verdict import rerun_explained

    again = host_runs("h", [start("a", 100, pid=1), end("a", 110, pid=1),
                            start("a", 130, pid=2, attempt=2), end("a", 140, pid=2, attempt=2)],
                      [], 200)

    def missing(_run: object) -> bool:
        return False  # no exit record of a1 on the host

    full_disk = [Fault("disk_full", "h", 105, 112)]
    found = duplicates(again, rerun_excuse=lambda run: rerun_explained(run, full_disk, missing))
    assert found == ["a: ran again after a1 succeeded, explained by disk_full on h at 105.0 "
                     "(no exit record of a/a1 on the host)"]
    # a reboot that killed the wrapper between the job's exit and its record
    reboot = [Fault("reboot", "h", 111, 111)]
    assert duplicates(again, rerun_excuse=lambda run: rerun_explained(run, reboot, missing)) \
        == ["a: ran again after a1 succeeded, explained by reboot on h at 111.0 "
            "(no exit record of a/a1 on the host)"]
    # the record is on the host: the engine could have known; no fault excuses the rerun
    for faults in (full_disk, reboot):
        assert duplicates(again, rerun_excuse=lambda run, f=faults: rerun_explained(run, f)) \
            == ["a: ran again after a1 succeeded"]
    elsewhere = [Fault("disk_full", "other", 105, 112), Fault("kill9", None, 105, 106, pid=9),
                 Fault("cut_host", "h", 105, 109), Fault("reboot", "h", 160, 160)]
    assert duplicates(again, rerun_excuse=lambda run: rerun_explained(run, elsewhere,
                                                                      missing)) == [
        "a: ran again after a1 succeeded"]


def test_a_gpu_held_by_two_engines_jobs_at_once_is_a_double_booking() -> None:
    records = [start("chaos1", 10, pid=1), start("intruder0-01", 12, pid=2),
               end("intruder0-01", 15, pid=2), end("chaos1", 20, pid=1, linger=20.5),
               start("intruder0-02", 20.2, pid=3), end("intruder0-02", 25, pid=3),
               start("chaos2", 25.1, pid=4), end("chaos2", 30, pid=4)]
    runs = host_runs("h", records, [], now=100)

    def engine(job: str) -> str:
        return "intruder" if job.startswith("intruder") else "chaos"

    found = double_bookings(runs, engine)
    assert len(found) == 2
    assert "chaos1/a1 (chaos) and intruder0-01/a1 (intruder)" in found[0]
    assert "intruder0-02/a1" in found[1]  # before chaos1's memory was released
    # one engine's own hand-over is never a double booking (its overlap check is another)
    assert double_bookings(runs, lambda job: "one") == []
    # a packed job of ours beside their ended job's lingering memory is not one
    lingering = host_runs("h", [start("intruder0-03", 10, pid=5),
                                end("intruder0-03", 20, pid=5, linger=21),
                                start("chaos3", 20.5, pid=6), end("chaos3", 30, pid=6)], [], 100)
    assert len(double_bookings(lingering, engine)) == 1
    assert double_bookings(lingering, engine, packed=frozenset({"chaos3"})) == []
    fault = Fault("second_engine", None, 11.0, 11.5, engine="intruder0")
    assert fault_trace(fault, HostRecords(runs=runs)) == "2 run(s) of intruder0"
    assert fault_trace(Fault("second_engine", None, 40.0, 41.0, engine="intruder0"),
                       HostRecords(runs=runs)) is None
    assert fault_trace(fault, HostRecords()) is None
