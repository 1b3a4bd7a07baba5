"""Which processes on an ended attempt's GPUs are worth asking its host about (no host here:
the probe's answer is built by hand)."""

from __future__ import annotations

from eq_tui.engine.tick.leftover_memory import Ended, leftover_candidates
from eq_tui.hosts.base import AttemptProbe, GpuProcess, GpuReading, HostSnapshot
from eq_tui.hosts.shell_protocol import with_owners


def running(key: str, pgid: int) -> AttemptProbe:
    return AttemptProbe(key=key, session_alive=True, pid=pgid, pid_alive=True, started=1.0,
                        exit_code=None, exited_at=None, log_size=10, output_ok=None, pgid=pgid)


def snapshot(processes: list[GpuProcess], attempts: list[AttemptProbe]) -> HostSnapshot:
    gpus = tuple(GpuReading(i, f"GPU-{i}", "Sim", 1000, 24576, 50) for i in range(2))
    return HostSnapshot(host="h", ok=True, taken_at=1.0, gpus=gpus, processes=tuple(processes),
                        attempts={a.key: a for a in attempts})


ENDED = Ended(job="a", attempt=1, host="h", gpus=(0,), attempt_dir="/d/a/1", ended=1.0)


def test_the_job_that_took_the_gpu_next_is_not_a_candidate() -> None:
    snap = snapshot([GpuProcess(200, "GPU-0", 500, pgid=200, sid=200),  # b, the next job
                     GpuProcess(201, "GPU-0", 300, pgid=201, sid=200)],  # b's, own group
                    [running("b", 200)])
    assert leftover_candidates(snap, ENDED) == set()


def test_processes_of_no_attempt_we_know_are_candidates() -> None:
    snap = snapshot([GpuProcess(100, "GPU-0", 500, pgid=100, sid=100),  # a's leaked worker
                     GpuProcess(300, "GPU-0", 500, pgid=300, sid=300),  # someone else's
                     GpuProcess(301, "GPU-0", 500),  # its group not known
                     GpuProcess(400, "GPU-1", 500, pgid=400, sid=400)],  # another GPU
                    [running("b", 200)])
    assert leftover_candidates(snap, ENDED) == {100, 300, 301}


def test_the_ended_attempts_own_group_stays_a_candidate_while_the_probe_still_sees_it() -> None:
    # the attempt that just ended is still in this tick's probe, with its process group
    snap = snapshot([GpuProcess(100, "GPU-0", 500, pgid=100, sid=100)], [running("a", 100)])
    assert leftover_candidates(snap, ENDED) == {100}


def test_a_process_the_probe_found_gone_is_not_a_candidate() -> None:
    # the driver still charges memory to a pid that `ps` no longer lists: nothing to end
    snap = snapshot([GpuProcess(100, "GPU-0", 500, running=False),
                     GpuProcess(101, "GPU-0", 500, running=True, pgid=101, sid=101),
                     GpuProcess(102, "GPU-0", 500)],  # not looked up (NVML, no ps)
                    [])
    assert leftover_candidates(snap, ENDED) == {101, 102}


def test_the_probe_marks_processes_ps_did_not_list_as_gone() -> None:
    listed = [GpuProcess(100, "GPU-0", 500), GpuProcess(200, "GPU-0", 300)]
    owned = with_owners(listed, ["100 100 100 eqtest python train.py"])
    assert [(p.pid, p.running, p.pgid, p.user) for p in owned] == [
        (100, True, 100, "eqtest"), (200, False, None, "")]
    assert with_owners(listed, None) == listed  # no owners section: nothing known


def test_an_attempts_own_process_comes_from_proc_without_user_or_command() -> None:
    """The probe reads an attempt's processes' group and session from /proc (no `ps`): three
    fields; someone else's still come from `ps` with their user and command."""
    listed = [GpuProcess(100, "GPU-0", 500), GpuProcess(300, "GPU-0", 700)]
    owned = with_owners(listed, ["100 90 90", "300 300 300 alice python their.py"])
    assert [(p.pid, p.running, p.pgid, p.sid, p.user, p.command) for p in owned] == [
        (100, True, 90, 90, "", ""), (300, True, 300, 300, "alice", "python their.py")]
