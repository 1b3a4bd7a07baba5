"""probe.sh's answer read in whole, and the requests written to the host scripts, byte for byte
(tests/unit/test_fuzz.py shows garbage never raises; tests/integration runs the real scripts).
"""

from __future__ import annotations

import pytest

from eq_tui.errors import HostError
from eq_tui.hosts.base import (
    AttemptProbe,
    AttemptRef,
    CommandCheck,
    DrainWait,
    GpuHealth,
    GpuProcess,
    GpuReading,
    LaunchRequest,
    PathCheck,
    ProbeRequest,
)
from eq_tui.hosts.shell_protocol import (
    launch_stdin,
    new_boundary,
    parse_probe,
    preflight_stdin,
    probe_stdin,
    script,
    split_sections,
    with_owners,
    with_utilisation,
)

B = "@@eq-00112233aabbccdd"
REQUEST = ProbeRequest(attempts=(AttemptRef("a", "eq_p_a_1", "/r/a/1", None),
                                 AttemptRef("b", "eq_p_b_1", "/r/b/1", "out.json")))


def answer(*sections: tuple[str, str], end: bool = True) -> str:
    text = "motd noise\n"
    for name, body in sections:
        text += f"{B} {name}\n{body}"
    return text + (f"{B} end\nafter\n" if end else "")


WHOLE = answer(
    ("sessions", "screen 123.eq_p_a_1\ntmux eq_p_b_1\nscreen nodot\ntmux \nother x\n"),
    ("gpus", "0, GPU-a, H100, 1000, 81559, 50\n1, GPU-b, H100, 0, 81559, 0\n"),
    ("gpus_rc 0", ""),
    ("apps", "4242, GPU-a, 900\n77, GPU-b, 10\n"), ("apps_rc 0", ""),
    ("owners", "4242 4240 4240 alice python train.py --lr 0.1\n"), ("owners_rc 0", ""),
    ("pmon", "0 4242 C 45 3 - - - - python\n"), ("pmon_rc 0", ""),
    ("health", "0, GPU-a, 2, No\n1, GPU-b, [N/A], Yes\nx, GPU-c, 1, no\n2, GPU-d, 1\n"),
    ("health_rc 0", ""),
    ("cores 16", ""),
    ("requests",
     "A\ta\t4240\t1\t1700000000.5\t-\t-\t2048\t-\t4240\n"
     "A\tb\t-\t0\t-\t3\t1700000100.25\tx\t1\n"
     "A\tshort\t1\n"
     "O\tj1\t1\nO\tj2\t0\nP\tj3\t1\nP\tbad\nT\tb\t" + b"boom\n".hex() + "\n"
     "L\ta\t" + b"\x1b[1mepoch 3\r".hex() + "\n"
     "E\ta\t" + b"\x1b[1mEpoch 5/8\r\n".hex() + "\n"
     "F\ta\t100\t" + b"more".hex() + "\nF\tb\tnope\tzz\n"),
)


def test_a_whole_probe_gives_every_fact() -> None:
    snap = parse_probe("h", WHOLE, B, REQUEST, taken_at=5.0, rtt_s=0.25)
    assert (snap.host, snap.ok, snap.taken_at, snap.rtt_s, snap.error) == ("h", True, 5.0, 0.25,
                                                                          None)
    assert snap.sessions == frozenset({"eq_p_a_1", "eq_p_b_1"})
    assert snap.gpus == (GpuReading(0, "GPU-a", "H100", 1000, 81559, 50),
                         GpuReading(1, "GPU-b", "H100", 0, 81559, 0))
    assert snap.processes == (
        GpuProcess(4242, "GPU-a", 900, "alice", "python train.py --lr 0.1", pgid=4240,
                   sid=4240, running=True, util_pct=45),
        GpuProcess(77, "GPU-b", 10, running=False, util_pct=0))
    assert snap.health == (GpuHealth(0, "GPU-a", 2, False), GpuHealth(1, "GPU-b", None, True))
    assert snap.cores == 16
    assert snap.output_checks == {"j1": True, "j2": False}
    assert snap.preconditions == {"j3": True}
    assert snap.warnings == ()
    assert snap.attempts == {
        "a": AttemptProbe("a", True, 4240, True, 1700000000.5, None, None, 2048, None,
                          log_tail="", last_line="epoch 3", pgid=4240, followed=b"more",
                          followed_from=100, epoch_line="Epoch 5/8"),
        "b": AttemptProbe("b", True, None, False, None, 3, 1700000100.25, 0, True,
                          log_tail="boom\n", last_line="", pgid=None)}


def test_a_probe_cut_off_or_missing_an_attempt_is_not_ok() -> None:
    cut = parse_probe("h", answer(("sessions", ""), end=False), B, REQUEST, taken_at=5.0,
                      rtt_s=0.1)
    assert (cut.ok, cut.error, cut.taken_at, cut.host) == (False, "probe output was cut off",
                                                          5.0, "h")
    missing = parse_probe("h", answer(("requests", "A\ta\t1\t1\t-\t-\t-\t0\t-\n")), B, REQUEST,
                          taken_at=6.0, rtt_s=0.1)
    assert (missing.ok, missing.error, missing.taken_at) == (
        False, "probe returned nothing for b", 6.0)


def test_nvidia_smi_failing_or_listing_nothing_is_a_warning() -> None:
    first = "NVIDIA-SMI has failed because it couldn't communicate " + "x" * 300
    failed = answer(("gpus", f"\n  \n{first}\nsecond\n"), ("gpus_rc 9", ""))
    snap = parse_probe("h", failed, B, ProbeRequest(), taken_at=0.0, rtt_s=None)
    assert snap.warnings == (f"nvidia-smi failed (exit 9): {first[:200]}",)
    assert snap.gpus == () and snap.ok
    empty = answer(("gpus", ""), ("gpus_rc 9", ""))
    assert parse_probe("h", empty, B, ProbeRequest(), taken_at=0.0,
                       rtt_s=None).warnings == ("nvidia-smi failed (exit 9): no output",)
    none = answer(("gpus", ""), ("gpus_rc 0", ""))
    assert parse_probe("h", none, B, ProbeRequest(), taken_at=0.0,
                       rtt_s=None).warnings == ("nvidia-smi listed no GPUs",)
    no_code = answer(("gpus", "junk line\n"))
    snap = parse_probe("h", no_code, B, ProbeRequest(), taken_at=0.0, rtt_s=None)
    assert snap.warnings == ("nvidia-smi: unexpected line 'junk line'",)
    no_gpus = parse_probe("h", answer(("sessions", "")), B, ProbeRequest(), taken_at=0.0,
                          rtt_s=None)
    assert no_gpus.warnings == () and no_gpus.cores is None


def test_processes_need_their_section_to_have_succeeded() -> None:
    base = (("gpus", "0, GPU-a, H100, 1000, 81559, 50\n"), ("gpus_rc 0", ""),
            ("apps", "4242, GPU-a, 900\nbad\n"))
    failed = parse_probe("h", answer(*base, ("apps_rc 1", "")), B, ProbeRequest(),
                         taken_at=0.0, rtt_s=None)
    assert failed.processes == () and failed.warnings == ()
    snap = parse_probe("h", answer(*base, ("apps_rc 0", ""), ("pmon", "0 4242 C 45\n"),
                                   ("pmon_rc 1", "")), B, ProbeRequest(), taken_at=0.0,
                       rtt_s=None)
    # no owners section: ps did not run, so nothing is known gone; pmon failed: no figure
    assert snap.processes == (GpuProcess(4242, "GPU-a", 900),)
    assert snap.warnings == ("nvidia-smi compute apps: unexpected line 'bad'",)


def test_health_needs_its_section_to_have_succeeded() -> None:
    rows = ("health", "0, GPU-a, 2, no\n")
    for codes in ((), (("health_rc 1", ""),)):
        snap = parse_probe("h", answer(rows, *codes), B, ProbeRequest(), taken_at=0.0,
                           rtt_s=None)
        assert snap.health == ()
    snap = parse_probe("h", answer(rows, ("health_rc 0", ""), ("cores 0", "")), B,
                       ProbeRequest(), taken_at=0.0, rtt_s=None)
    assert snap.health == (GpuHealth(0, "GPU-a", 2, False),) and snap.cores is None


def test_owners_give_group_session_user_and_command_or_mark_a_process_gone() -> None:
    procs = [GpuProcess(1, "GPU-a", 10), GpuProcess(2, "GPU-a", 20), GpuProcess(3, "GPU-b", 30)]
    lines = ["1 1 1 bob python  train.py  ", "2 9 8", "x 1 1 eve y", "3 4", " "]
    assert with_owners(procs, lines) == [
        GpuProcess(1, "GPU-a", 10, "bob", "python  train.py", pgid=1, sid=1, running=True),
        GpuProcess(2, "GPU-a", 20, "", "", pgid=9, sid=8, running=True),
        GpuProcess(3, "GPU-b", 30, running=False)]
    assert with_owners(procs, ["4 4 4 carl"]) == [
        GpuProcess(1, "GPU-a", 10, running=False), GpuProcess(2, "GPU-a", 20, running=False),
        GpuProcess(3, "GPU-b", 30, running=False)]
    assert with_owners(procs, None) == procs


def test_a_processes_utilisation_is_its_own_on_its_gpu() -> None:
    gpus = [GpuReading(0, "GPU-a", "X", 0, 1, 0), GpuReading(1, "GPU-b", "X", 0, 1, 0)]
    procs = [GpuProcess(5, "GPU-a", 1), GpuProcess(5, "GPU-b", 1), GpuProcess(6, "GPU-z", 1)]
    utils = {(0, 5): 30, (1, 5): 70, (-1, 6): 99}
    assert [p.util_pct for p in with_utilisation(procs, gpus, utils)] == [30, 70, 99]
    assert [p.util_pct for p in with_utilisation(procs, gpus, {})] == [0, 0, 0]


def test_sections_take_codes_with_or_without_rc_and_stop_at_end() -> None:
    sections = split_sections(f"{B} a\n1\n{B} a_rc x\n{B} cores 8\n2\n{B} b\n3\n{B} end\n"
                              f"{B} c\n4\n", B)
    assert sections.lines == {"a": ["1"], "b": ["3"]}
    assert sections.codes == {"a_rc": None, "cores": 8} and sections.ended


def test_a_followed_log_is_asked_from_its_offset() -> None:
    request = ProbeRequest(attempts=(AttemptRef("k", "eq_s", "/d", "o/*.pt"),
                                     AttemptRef("m", "eq_t", "/e", None)),
                           follow=(("k", 4096), ("m", -5)))
    assert probe_stdin(request) == b"A\tk\teq_s\t/d\to/*.pt\t4096\nA\tm\teq_t\t/e\t-\t0\n"
    with pytest.raises(HostError, match=r"^output_check 'a\\tb' contains a tab or newline$"):
        probe_stdin(ProbeRequest(attempts=(AttemptRef("k", "s", "/d", "a\tb"),)))
    with pytest.raises(HostError, match=r"^attempt dir '/d\\n' contains a tab or newline$"):
        probe_stdin(ProbeRequest(attempts=(AttemptRef("k", "s", "/d\n", None),)))
    with pytest.raises(HostError, match=r"^key 'k\\r' contains a tab or newline$"):
        probe_stdin(ProbeRequest(output_checks=(PathCheck("k\r", "x"),)))
    with pytest.raises(HostError, match=r"^path 'x\\ty' contains a tab or newline$"):
        probe_stdin(ProbeRequest(preconditions=(PathCheck("k", "x\ty"),)))


def test_preflight_requests_preconditions_and_commands() -> None:
    checks = (PathCheck("j1", "data/*.csv"), PathCheck("j2", "ckpt"))
    commands = (CommandCheck("c1", "python", "train.py", ("j1",)),
                CommandCheck("c2", "bash", None, ("j2",)),
                CommandCheck("c3", "py\tthon", None, ("j3",)),
                CommandCheck("c4", "python", "a\nb.py", ("j4",)))
    assert preflight_stdin(checks, commands) == (
        b"P\tj1\tdata/*.csv\nP\tj2\tckpt\nC\tc1\tpython\nS\tc1\ttrain.py\nC\tc2\tbash\n")
    assert preflight_stdin(()) == b""


def launch(**kwargs: object) -> LaunchRequest:
    base: dict[str, object] = {
        "job_id": "j", "attempt": 1, "session": "s", "attempt_dir": "/d", "cwd": None,
        "cmd": "python train.py --lr 0.1", "gpus": (0,), "env": {}, "conda": None,
        "conda_hook": None, "launcher": "screen"}
    return LaunchRequest(**{**base, **kwargs})  # type: ignore[arg-type]


def test_a_launch_request_is_its_env_quoted_then_the_command() -> None:
    text = launch_stdin(launch(env={"TOKEN": "a b'c", "LR": "0.1"}, cwd="/w d", conda="env1",
                               conda_hook="/opt/c/hook.sh", venv=".venv")).decode()
    assert text == ("6\n"
                    "export TOKEN='a b'\"'\"'c'\n"
                    "export LR=0.1\n"
                    "export EQ_CWD='/w d'\n"
                    "export EQ_CONDA=env1\n"
                    "export EQ_CONDA_HOOK=/opt/c/hook.sh\n"
                    "export EQ_VENV=.venv\n"
                    "python train.py --lr 0.1\nEQ_LAUNCH_END\n")
    bare = launch_stdin(launch()).decode()
    assert bare.startswith("4\nexport EQ_CWD=''\nexport EQ_CONDA=''\n")
    for name in ("1X", "A-B", "", "A B"):
        with pytest.raises(HostError, match=r"^environment variable name .* is not valid$"):
            launch_stdin(launch(env={name: "x"}))


def test_a_drain_wait_travels_first_on_a_launch_requests_stdin() -> None:
    """launch.sh's first line, when the launch waits for its GPUs' memory (_drain_wait.sh)."""
    plain = launch_stdin(launch(gpus=(2, 3)))
    waiting = launch_stdin(launch(gpus=(2, 3), drain=DrainWait((2, 3), 500, 100, 0.1)))
    assert waiting == b"D 2,3 500 100 0.1\n" + plain
    assert launch_stdin(launch(drain=DrainWait((1,), 1024, 40, 0.25))).startswith(
        b"D 1 1024 40 0.25\n4\nexport EQ_CWD=''\n")


def test_a_script_carries_the_pieces_it_includes() -> None:
    text = script("launch.sh")
    assert "# eq-tui include:" not in text
    assert script("_launch_request.sh").strip() in text


def test_the_lab_rules_who_we_are_the_clock_and_who_waits_come_with_the_probe() -> None:
    text = answer(("rules_path", " /etc/eq-tui/rules.yaml \n"), ("user", " alice \n"),
                  ("clock", " 13:05 2 \n"), ("wants", "bob 123\n\ncarl\n  \nalice 9\n"),
                  ("rules", "keep_free: [1]\n"), ("rules_sum", "3141592653 15 -\n"))
    snap = parse_probe("h", text, B, ProbeRequest(), taken_at=0.0, rtt_s=None)
    lab = snap.lab
    assert lab is not None and lab.rules is not None
    assert (lab.path, lab.user, lab.clock, lab.waiting, lab.warning) == (
        "/etc/eq-tui/rules.yaml", "alice", (13 * 60 + 5, 2), frozenset({"bob", "carl"}), "")
    assert lab.checksum == "3141592653.15"  # what a launch carries, to see the file changed
    assert dict(lab.rules.keep_free) == {1: ""} and snap.warnings == ()


def test_lab_rules_that_are_not_rules_are_a_warning_and_none_is_no_rules() -> None:
    text = answer(("rules_path", "/etc/r.yaml\n"), ("rules", "- 1\n"))
    snap = parse_probe("h", text, B, ProbeRequest(), taken_at=0.0, rtt_s=None)
    assert snap.lab is not None and snap.lab.rules is None
    assert snap.warnings == ("lab rules /etc/r.yaml ignored, none apply until it is fixed: the "
                             "file is not a mapping of rules",)
    bare = parse_probe("h", answer(("user", "u\n")), B, ProbeRequest(), taken_at=0.0, rtt_s=None)
    assert bare.lab is not None
    assert (bare.lab.rules, bare.lab.path, bare.lab.clock, bare.lab.waiting) == (
        None, "", None, frozenset())


def test_claims_on_the_hosts_gpus_come_with_the_probe() -> None:
    line = "c0.claim 0 bob proj tok j1 2 4242 1024 eq_proj_j1_2"
    snap = parse_probe("h", answer(("claims", f"{line}\nshort line\n")), B, ProbeRequest(),
                       taken_at=0.0, rtt_s=None)
    assert [(c.gpu, c.user, c.job, c.attempt, c.pid, c.mib) for c in snap.claims] == [
        (0, "bob", "j1", 2, 4242, 1024)]
    assert parse_probe("h", answer(), B, ProbeRequest(), taken_at=0.0, rtt_s=None).claims == ()


def test_an_attempt_is_read_only_from_an_a_line() -> None:
    text = answer(("requests", "X\ta\t1\t1\t-\t-\t-\t0\t-\n"))
    request = ProbeRequest(attempts=(AttemptRef("a", "eq_a", "/d", None),))
    snap = parse_probe("h2", text, B, request, taken_at=3.0, rtt_s=None)
    assert (snap.host, snap.ok, snap.error) == ("h2", False, "probe returned nothing for a")


def test_garbled_follow_hex_and_health_lines_are_skipped_not_the_rest() -> None:
    requests = ("F\ta\tnope\t41\nF\ta\t5\nF\tb\t7\t6f 6b\n"
                "T\ta\t" + "ff41".replace("41", " 41") + "\nT\tb\tzz\nL\ta\t" + "c3".upper()
                + "\n")
    request = ProbeRequest(attempts=(AttemptRef("a", "eq_a", "/d", None),
                                     AttemptRef("b", "eq_b", "/d", None)))
    facts = "A\ta\t1\t1\t-\t-\t-\t0\t-\nA\tb\t1\t1\t-\t-\t-\t0\t-\n"
    snap = parse_probe("h", answer(("requests", facts + requests),
                                   ("health", "x, GPU-a, 1, no\n0, GPU-b, 1, no\n"),
                                   ("health_rc 0", "")),
                       B, request, taken_at=0.0, rtt_s=None)
    a, b = snap.attempts["a"], snap.attempts["b"]
    assert (a.followed, a.followed_from, b.followed, b.followed_from) == (b"", None, b"ok", 7)
    # invalid UTF-8 is replaced, not dropped; hex may carry spaces; non-hex is no text
    assert (a.log_tail, b.log_tail, a.last_line) == ("\ufffdA", "", "\ufffd")
    assert snap.health == (GpuHealth(0, "GPU-b", 1, False),)


def test_session_lines_name_the_session_after_the_first_dot() -> None:
    text = answer(("sessions", "screen 12.eq_p.a 1\ntmux eq.x y\n"))
    snap = parse_probe("h", text, B, ProbeRequest(), taken_at=0.0, rtt_s=None)
    assert snap.sessions == frozenset({"eq_p.a 1", "eq.x y"})


def test_gpu_and_app_warnings_are_both_kept() -> None:
    text = answer(("gpus", "0, GPU-a, H100, 1, 2, 3\nodd\n"), ("gpus_rc 0", ""),
                  ("apps", "bad\n"), ("apps_rc 0", ""))
    snap = parse_probe("h", text, B, ProbeRequest(), taken_at=0.0, rtt_s=None)
    assert snap.warnings == ("nvidia-smi: unexpected line 'odd'",
                             "nvidia-smi compute apps: unexpected line 'bad'")


def test_an_owner_line_with_a_user_and_no_command() -> None:
    assert with_owners([GpuProcess(2, "GPU-a", 20)], ["2 9 8 bob"]) == [
        GpuProcess(2, "GPU-a", 20, "bob", "", pgid=9, sid=8, running=True)]


def test_a_code_line_without_a_value_or_with_two_is_no_number() -> None:
    sections = split_sections(f"{B} gpus_rc\n{B} apps_rc 1 2\n{B} end\n", B)
    assert sections.codes == {"gpus_rc": None, "apps_rc": None} and sections.lines == {}


def test_a_boundary_is_eight_random_bytes_in_hex() -> None:
    import re

    first, second = new_boundary(), new_boundary()
    assert re.fullmatch(r"@@eq-[0-9a-f]{16}", first) and first != second


def test_an_attempt_lines_key_and_session_are_named_when_refused() -> None:
    with pytest.raises(HostError, match=r"^key 'a\\tb' contains a tab or newline$"):
        probe_stdin(ProbeRequest(attempts=(AttemptRef("a\tb", "s", "/d", None),)))
    with pytest.raises(HostError, match=r"^session 's\\n' contains a tab or newline$"):
        probe_stdin(ProbeRequest(attempts=(AttemptRef("k", "s\n", "/d", None),)))


def test_a_bare_launch_request_exports_empty_settings() -> None:
    assert launch_stdin(launch(cmd="true")).decode() == (
        "4\nexport EQ_CWD=''\nexport EQ_CONDA=''\nexport EQ_CONDA_HOOK=''\nexport EQ_VENV=''\n"
        "true\nEQ_LAUNCH_END\n")
