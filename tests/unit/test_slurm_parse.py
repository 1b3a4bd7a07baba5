"""What Slurm's CLIs print, read into records, and a Slurm job's end read into an attempt.

The Slurm host's integration test (tests/integration/test_slurm.py) runs these against a real
slurmctld; here each rule is pinned on the text Slurm prints, including the odd cases a
single-node cluster does not produce (signals, node lists, GRES spellings, requeues).
"""

from __future__ import annotations

import pytest

from eq_tui.hosts.base import AttemptProbe
from eq_tui.hosts.slurm_parse import (
    ALIVE_STATES,
    SIGKILL_EXIT,
    SIGTERM_EXIT,
    VANISHED_STATES,
    NodeGpus,
    SlurmJob,
    attempt_from_slurm,
    exit_from_slurm,
    expand_hostlist,
    needs_lookup,
    parse_nodes,
    parse_sacct,
    parse_scontrol_jobs,
    parse_squeue,
    pending_detail,
)


def files(exit_code: int | None = None, *, log_tail: str = "",
          exited_at: float | None = None, alive: bool = True) -> AttemptProbe:
    """What probe.sh found in the attempt dir (the pid there belongs to a compute node)."""
    return AttemptProbe(key="a", session_alive=alive, pid=42, pid_alive=True, started=10.0,
                        exit_code=exit_code, exited_at=exited_at, log_size=5,
                        output_ok=None, log_tail=log_tail, detail="stale")


def job(state: str, exit_code: int | None = None, *, reason: str = "",
        job_id: str = "17") -> SlurmJob:
    return SlurmJob(job_id, "eq_a", state, reason, exit_code)


# ---- exit codes ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "code"), [
    ("0:0", 0), ("3:0", 3), (" 2:0 ", 2), ("0:9", 137), ("0:15", 143), ("1:9", 137),
    ("5", 5), ("5:", 5), ("", None), ("x:0", None), ("1:y", None), (":", None),
])
def test_exit_code_is_the_code_or_128_plus_the_signal(text: str, code: int | None) -> None:
    assert exit_from_slurm(text) == code


# ---- node lists ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "names"), [
    ("gpu01", ("gpu01",)),
    (" gpu01 ", ("gpu01",)),
    ("gpu[01-03,07],login1", ("gpu01", "gpu02", "gpu03", "gpu07", "login1")),
    ("n[8-10]", ("n8", "n9", "n10")),
    ("n[008-010]", ("n008", "n009", "n010")),
    ("rack[1-2]-gpu", ("rack1-gpu", "rack2-gpu")),
    ("n[5]", ("n5",)),
    ("n[3-1]", ()),
    ("n[a-b],m", ("n[a-b]", "m")),
    ("n[1-x]", ("n[1-x]",)),
    ("n[]", ("n[]",)),
    ("login1,gpu[1-2]", ("login1", "gpu1", "gpu2")),
    ("n[a-b,1-2]", ("n[a-b]", "n1", "n2")),
    ("", ()),
])
def test_a_compressed_node_list_expands_to_names(text: str, names: tuple[str, ...]) -> None:
    assert expand_hostlist(text) == names


# ---- squeue -------------------------------------------------------------------------------


def test_squeue_lines_give_state_reason_and_nodes_per_name() -> None:
    text = ("garbage line\n"
            "12|eq_a|RUNNING|None|gpu[01-02]\n"
            "13|eq_b|PENDING|Resources|\n"
            "14|eq_c|CANCELLED by 0|(null)|(null)\n"
            "15|eq_d|COMPLETING|None|n/a\n"
            "16|eq_e|PENDING|Priority\n"
            "17|other|RUNNING|None|gpu03\n"
            "garbage line\n"
            "1|2|3\n"
            "1|2|3|4|5|6\n")
    jobs = parse_squeue(text, prefix="eq_")
    assert jobs == {
        "eq_a": SlurmJob("12", "eq_a", "RUNNING", "", nodes=("gpu01", "gpu02")),
        "eq_b": SlurmJob("13", "eq_b", "PENDING", "Resources"),
        "eq_c": SlurmJob("14", "eq_c", "CANCELLED", ""),
        "eq_d": SlurmJob("15", "eq_d", "COMPLETING", ""),
        "eq_e": SlurmJob("16", "eq_e", "PENDING", "Priority"),
    }
    assert set(parse_squeue(text)) == {"eq_a", "eq_b", "eq_c", "eq_d", "eq_e", "other"}


def test_squeue_keeps_the_newest_submission_of_a_name() -> None:
    """A requeued or resubmitted job: the higher job number is the live one, whatever the
    order squeue prints them in; array and het suffixes count by their leading number."""
    jobs = parse_squeue("31|eq_a|RUNNING|None\n9|eq_a|PENDING|Priority\n")
    assert jobs["eq_a"].job_id == "31"
    jobs = parse_squeue("9|eq_a|PENDING|Priority\n31_2|eq_a|RUNNING|None\n")
    assert jobs["eq_a"].job_id == "31_2"
    jobs = parse_squeue("7|eq_a|PENDING|Priority\n7|eq_a|RUNNING|None\n")
    assert jobs["eq_a"].state == "RUNNING"  # the same number again: the later line
    jobs = parse_squeue("x|eq_a|PENDING|Priority\n0|eq_a|RUNNING|None\n")
    assert jobs["eq_a"].job_id == "0"  # a number beats no number
    jobs = parse_squeue("0|eq_a|RUNNING|None\nx|eq_a|PENDING|Priority\n")
    assert jobs["eq_a"].job_id == "0"


@pytest.mark.parametrize(("raw", "base"), [
    ("RUNNING", "RUNNING"), ("cancelled by 1000", "CANCELLED"), ("COMPLETED+", "COMPLETED"),
    ("  failed  ", "FAILED"), ("", ""), ("NEWSTATEX+ by 1", "NEWSTATEX"),
])
def test_a_state_is_its_first_word_upper_case_without_the_plus(raw: str, base: str) -> None:
    assert parse_squeue(f"1|eq_a|{raw}|None")["eq_a"].state == base


# ---- sacct and scontrol ----------------------------------------------------------------------


def test_sacct_lines_give_state_and_exit_for_the_names_asked() -> None:
    text = ("40|eq_a|FAILED|2:0\n"
            "40.batch|eq_a|FAILED|2:0\n"
            "41|eq_b|CANCELLED by 0|0:15\n"
            "42|eq_c|COMPLETED|0:0|extra\n"
            "43|other|FAILED|1:0\n"
            "44|eq_d|TIMEOUT\n"
            "35|eq_a|COMPLETED|0:0\n")
    jobs = parse_sacct(text, frozenset({"eq_a", "eq_b", "eq_c", "eq_d"}))
    assert jobs == {
        "eq_a": SlurmJob("40", "eq_a", "FAILED", exit_code=2),
        "eq_b": SlurmJob("41", "eq_b", "CANCELLED", exit_code=143),
        "eq_c": SlurmJob("42", "eq_c", "COMPLETED", exit_code=0),
    }


def test_scontrol_lines_give_state_reason_and_exit_for_the_names_asked() -> None:
    text = ("JobId=50 JobName=eq_a UserId=u(1) JobState=PENDING Reason=Resources ExitCode=0:0\n"
            "JobId=51 JobName=eq_b JobState=OUT_OF_MEMORY Reason=OutOfMemory ExitCode=0:125\n"
            "JobId=52 JobName=eq_c\n"
            "JobName=eq_d JobState=RUNNING\n"
            "JobId=53 JobName=other JobState=RUNNING\n"
            "JobId=49 JobName=eq_a JobState=COMPLETED ExitCode=0:0\n"
            "not a key value line\n")
    jobs = parse_scontrol_jobs(text, frozenset({"eq_a", "eq_b", "eq_c", "eq_d"}))
    assert jobs == {
        "eq_a": SlurmJob("50", "eq_a", "PENDING", "Resources", 0),
        "eq_b": SlurmJob("51", "eq_b", "OUT_OF_MEMORY", "OutOfMemory", 253),
        "eq_c": SlurmJob("52", "eq_c", "", "", None),
    }


def test_a_key_value_token_keeps_everything_after_its_first_equals_sign() -> None:
    jobs = parse_scontrol_jobs("JobId=5 JobName=eq_a Reason=a=b JobState=RUNNING\n",
                               frozenset({"eq_a"}))
    assert jobs["eq_a"].reason == "a=b"


# ---- what a waiting job says ---------------------------------------------------------------


def test_a_pending_job_shows_its_reason_when_it_has_one() -> None:
    assert pending_detail(job("PENDING", reason="Resources")) == "PENDING (Resources)"
    assert pending_detail(job("CONFIGURING")) == "CONFIGURING"


def test_a_lookup_is_needed_only_for_an_ended_attempt_without_an_exit_record() -> None:
    assert needs_lookup(None, files())
    assert needs_lookup(job("FAILED"), files())
    assert not needs_lookup(job("RUNNING"), files())
    assert not needs_lookup(None, files(0))
    assert not needs_lookup(job("FAILED"), files(1))


# ---- an attempt from Slurm's view ------------------------------------------------------------


def test_a_running_job_is_alive_with_no_detail() -> None:
    seen = attempt_from_slurm(files(alive=False), job("RUNNING"))
    assert (seen.session_alive, seen.pid_alive, seen.detail) == (True, True, "")
    assert seen.exit_code is None and seen.pid == 42


def test_a_pending_job_is_alive_without_a_process_and_says_why() -> None:
    seen = attempt_from_slurm(files(), job("PENDING", reason="Priority"))
    assert (seen.session_alive, seen.pid_alive, seen.detail) == (True, False, "PENDING (Priority)")


@pytest.mark.parametrize("state", sorted(ALIVE_STATES - {"RUNNING", "PENDING"}))
def test_every_alive_state_keeps_the_attempt_alive_and_named(state: str) -> None:
    seen = attempt_from_slurm(files(), job(state))
    assert (seen.session_alive, seen.pid_alive, seen.detail) == (True, True, state)


def test_completing_with_an_exit_record_has_ended() -> None:
    seen = attempt_from_slurm(files(0, log_tail="done\n"), job("COMPLETING"))
    assert (seen.session_alive, seen.pid_alive, seen.detail) == (False, False, "")
    assert seen.exit_code == 0 and seen.log_tail == "done\n"
    # without the record it is still alive
    assert attempt_from_slurm(files(), job("COMPLETING")).session_alive


def test_an_exit_record_is_the_answer_once_the_job_has_left() -> None:
    for slurm in (None, job("COMPLETED", 0), job("FAILED", 1), job("CANCELLED", 143)):
        seen = attempt_from_slurm(files(3, log_tail="tail\n", exited_at=5.0), slurm)
        assert (seen.session_alive, seen.pid_alive, seen.detail) == (False, False, "")
        assert (seen.exit_code, seen.log_tail, seen.exited_at) == (3, "tail\n", 5.0)


def test_an_exit_record_of_a_job_slurm_killed_for_memory_says_so() -> None:
    seen = attempt_from_slurm(files(137, log_tail="epoch 3\n"), job("OUT_OF_MEMORY", 137))
    assert seen.exit_code == 137 and seen.detail == "OUT_OF_MEMORY"
    assert seen.log_tail == "epoch 3\n[eq-tui] Slurm job 17 ended OUT_OF_MEMORY (exit 137)\n"
    assert not seen.session_alive and not seen.pid_alive


@pytest.mark.parametrize("state", sorted(VANISHED_STATES | {"COMPLETED"}))
def test_a_job_gone_without_an_exit_record_is_lost(state: str) -> None:
    seen = attempt_from_slurm(files(log_tail="x\n"), job(state, 0), log_tail="ignored\n")
    assert (seen.exit_code, seen.detail, seen.session_alive, seen.pid_alive) == (
        None, state, False, False)
    assert seen.log_tail == "x\n"


def test_a_job_slurm_does_not_know_without_an_exit_record_is_lost() -> None:
    seen = attempt_from_slurm(files(), None)
    assert (seen.exit_code, seen.detail, seen.session_alive) == (None, "not known to Slurm",
                                                                 False)


def test_out_of_memory_without_an_exit_record_is_a_kill_with_the_note() -> None:
    seen = attempt_from_slurm(files(exited_at=7.0), job("OUT_OF_MEMORY"), log_tail="ep 1\n")
    assert (seen.exit_code, seen.detail, seen.exited_at) == (SIGKILL_EXIT, "OUT_OF_MEMORY", 7.0)
    assert seen.log_tail == "ep 1\n[eq-tui] Slurm job 17 ended OUT_OF_MEMORY\n"
    assert not seen.session_alive and not seen.pid_alive


@pytest.mark.parametrize("state", ["TIMEOUT", "CANCELLED"])
def test_timeout_and_cancel_keep_slurms_code_or_read_as_sigterm(state: str) -> None:
    assert attempt_from_slurm(files(), job(state, 9)).exit_code == 9
    for code in (None, 0):
        seen = attempt_from_slurm(files(), job(state, code), log_tail="")
        assert (seen.exit_code, seen.detail) == (SIGTERM_EXIT, state)
        assert not seen.session_alive and not seen.pid_alive
    seen = attempt_from_slurm(files(), job(state, 0), log_tail="last\n\n")
    assert seen.log_tail == f"last\n[eq-tui] Slurm job 17 ended {state} (exit 0)\n"


def test_failed_without_an_exit_record_keeps_slurms_code_or_reads_as_one() -> None:
    seen = attempt_from_slurm(files(), job("FAILED", 4), log_tail="boom\n")
    assert (seen.exit_code, seen.detail) == (4, "FAILED")
    assert seen.log_tail == "boom\n[eq-tui] Slurm job 17 ended FAILED (exit 4)\n"
    assert not seen.session_alive and not seen.pid_alive
    assert attempt_from_slurm(files(), job("FAILED", 0)).exit_code == 1
    seen = attempt_from_slurm(files(), job("SPECIAL_EXIT"), log_tail="   \n")
    assert (seen.exit_code, seen.detail) == (1, "SPECIAL_EXIT")
    assert seen.log_tail == "[eq-tui] Slurm job 17 ended SPECIAL_EXIT\n"


# ---- nodes and their GPUs --------------------------------------------------------------------


def test_nodes_give_their_gpus_allocated_and_in_all() -> None:
    text = ("NodeName=gpu01 Arch=x86_64 State=MIXED Partitions=gpu,debug "
            "Gres=gpu:a100:4(S:0-1) GresUsed=gpu:a100:1(IDX:0)\n"
            "NodeName=gpu02 State=IDLE Partitions=gpu Gres=gpu:2,gpu:h100:2 GresUsed=gpu:0\n"
            "NodeName=cpu01 State=IDLE Partitions=cpu Gres=(null) GresUsed=N/A\n"
            "NodeName=odd State=DOWN Gres=gpu,tmpdisk:100,gpu:a100\n"
            "Arch=x86_64 State=IDLE\n")
    assert parse_nodes(text) == [
        NodeGpus("gpu01", "MIXED", ("gpu", "debug"), 4, 1),
        NodeGpus("gpu02", "IDLE", ("gpu",), 4, 0),
        NodeGpus("cpu01", "IDLE", ("cpu",), 0, 0),
        NodeGpus("odd", "DOWN", (), 2, 0),
    ]
    assert [n.node for n in parse_nodes(text, "gpu")] == ["gpu01", "gpu02"]
    assert [n.node for n in parse_nodes(text, "debug")] == ["gpu01"]
    assert parse_nodes(text, "none") == []
    assert parse_nodes("NodeName=n1\n") == [NodeGpus("n1", "", (), 0, 0)]


def test_the_note_keeps_the_tails_own_spacing_and_no_tail_is_the_note_alone() -> None:
    seen = attempt_from_slurm(files(), job("FAILED", 2), log_tail="epoch 3  \n\n")
    assert seen.log_tail == "epoch 3  \n[eq-tui] Slurm job 17 ended FAILED (exit 2)\n"
    assert attempt_from_slurm(files(), job("TIMEOUT")).log_tail == \
        "[eq-tui] Slurm job 17 ended TIMEOUT\n"


def test_node_lines_are_read_past_other_lines_and_other_partitions() -> None:
    text = ("Arch=x86_64 State=IDLE\n"
            "NodeName=a State=IDLE Partitions=cpu Gres=gpu:1\n"
            "NodeName=b State=IDLE Partitions=gpu Gres=gpu:2\n")
    assert [n.node for n in parse_nodes(text, "gpu")] == ["b"]
    assert [n.node for n in parse_nodes(text)] == ["a", "b"]
