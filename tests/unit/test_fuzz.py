"""Garbage in, never a traceback: CLI arguments, nvidia-smi output, probe output, log bytes.

`EQ_HYPOTHESIS_EXAMPLES=1000 .venv/bin/pytest tests/unit/test_fuzz.py
tests/unit/manifest/test_manifest.py` (or `EQ_FULL=1 .ci/test`) is the long run; the test
command uses the default (200 per target).
"""

from __future__ import annotations

import contextlib
import io
import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from eq_tui.cli.main import main
from eq_tui.hosts.base import AttemptRef, ProbeRequest
from eq_tui.hosts.gpu_csv import parse_apps, parse_gpus, parse_pmon
from eq_tui.hosts.logclean import clean_text
from eq_tui.hosts.shell_protocol import parse_probe

EXAMPLES = int(os.environ.get("EQ_HYPOTHESIS_EXAMPLES", "200"))
FAST = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
BOUNDARY = "@@eq-0123456789abcdef"

FLAGS = ["--no-ui", "--json", "--dry-run", "--fresh", "--detach", "--poll", "--run-dir",
         "--theme", "--ssh-config", "status", "stop", "attach", "-x", "--", "0", "-1", "nan"]


@FAST
@given(st.lists(st.one_of(st.sampled_from(FLAGS), st.text(max_size=12)), max_size=6))
def test_cli_arguments_give_a_usage_error_or_a_clean_exit(args: list[str]) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(["/nonexistent-eq-tui-dir/" + a if a.endswith((".yaml", ".json"))
                         else a for a in args])
        except SystemExit as exc:  # --help / --version
            code = int(exc.code or 0)
    assert code in (0, 2, 3), (args, code, err.getvalue())
    assert "Traceback" not in err.getvalue()


csv_cell = st.one_of(st.integers(-5, 100000).map(str), st.sampled_from(
    ["[N/A]", "[Not Supported]", "", "GPU-x", "NVIDIA A100", "1e3", "12 MiB", "99 %", "inf",
     "nan", "1e999", "-Infinity"]), st.text(max_size=6))
NOT_A_READING = st.sampled_from(["[N/A]", "[Not Supported]", "[Unknown Error]", "", "nan",
                                 "inf", "1e999", "garbage"])


@FAST
@given(st.lists(st.lists(csv_cell, max_size=8).map(", ".join), max_size=6).map("\n".join))
@example("INF, 0, 0\nnan, 1e999, -inf")
def test_odd_nvidia_smi_csv_never_raises(text: str) -> None:
    gpus, warnings = parse_gpus(text)
    apps, app_warnings = parse_apps(text)
    lines = [line for line in text.splitlines() if line.strip()]
    # every non-empty line is a reading or a warning, never silently dropped
    assert len(gpus) + len([w for w in warnings if "no launches" not in w]) == len(lines)
    for gpu in gpus:
        assert gpu.memory_used_mib is None or isinstance(gpu.memory_used_mib, int)
        if gpu.memory_used_mib is None:
            assert any(w.startswith(f"GPU {gpu.index}: memory.used") for w in warnings)
    assert all(isinstance(a.pid, int) for a in apps) and isinstance(app_warnings, list)


@FAST
@given(st.integers(0, 7), NOT_A_READING, st.integers(1, 81920))
def test_a_memory_reading_that_is_not_a_number_gives_no_reading_and_a_warning(
        index: int, used: str, total: int) -> None:
    gpus, warnings = parse_gpus(f"{index}, GPU-x, NVIDIA A100, {used}, {total}, [N/A]\n"
                                f"{index + 1}, GPU-y, NVIDIA A100, 10, {total}, 5")
    assert [g.index for g in gpus] == [index, index + 1]
    assert gpus[0].memory_used_mib is None and gpus[0].utilization_pct is None
    assert gpus[1].memory_used_mib == 10 and gpus[1].utilization_pct == 5
    assert warnings == [f"GPU {index}: memory.used is {used!r}; no launches on it"]


def test_infinite_readings_are_not_readings() -> None:
    gpus, warnings = parse_gpus("0, GPU-a, X, inf, 1e999, 0\ninf, GPU-b, X, 1, 2, 3")
    assert [(g.index, g.memory_used_mib, g.memory_total_mib) for g in gpus] == [(0, None, None)]
    assert len(warnings) == 2
    apps, app_warnings = parse_apps("-Infinity, GPU-a, 12\n7, GPU-a, inf")
    assert [(a.pid, a.used_mib) for a in apps] == [(7, None)] and len(app_warnings) == 1


def _probe_text(attempt_line: str) -> str:
    return (f"{BOUNDARY} sessions\nscreen 123.eq_p_t_j_a1\n{BOUNDARY} gpus\n"
            "0, GPU-a, Sim, 100, 24576, 0\n"
            f"{BOUNDARY} gpus_rc 0\n{BOUNDARY} apps\n{BOUNDARY} apps_rc 0\n"
            f"{BOUNDARY} requests\n{attempt_line}\nL\tj\t6869\n{BOUNDARY} end\n")


REQUEST = ProbeRequest(attempts=(AttemptRef("j", "eq_p_t_j_a1", "/x", None),))
field = st.one_of(st.just("-"), st.integers(0, 2**31).map(str))
attempt_lines = st.builds(
    lambda pid, alive, start, code, at, size, out: "\t".join(
        ["A", "j", pid, alive, start, code, at, size, out]),
    field, st.sampled_from(["0", "1"]), st.one_of(st.just("-"), st.floats(0, 2e9).map(str)),
    field, field, st.integers(0, 10**9).map(str), st.sampled_from(["-", "0", "1"]))


@FAST
@given(st.one_of(attempt_lines, st.text(max_size=80)), st.data())
def test_a_probe_cut_before_its_end_marker_is_never_a_good_probe(attempt_line: str,
                                                                 data: st.DataObject) -> None:
    full = _probe_text(attempt_line)
    cut = data.draw(st.integers(0, full.index(f"{BOUNDARY} end") + len(BOUNDARY) + 3))
    snap = parse_probe("h", full[:cut], BOUNDARY, REQUEST, taken_at=0.0, rtt_s=None)
    assert not snap.ok and snap.error == "probe output was cut off"


@FAST
@given(attempt_lines)
def test_a_whole_probe_with_any_attempt_facts_parses_them(attempt_line: str) -> None:
    snap = parse_probe("h", _probe_text(attempt_line), BOUNDARY, REQUEST, taken_at=0.0,
                       rtt_s=None)
    assert snap.ok, snap.error
    _, _, pid, alive, start, code, exited_at, size, out = attempt_line.split("\t")
    got = snap.attempts["j"]
    assert got.pid == (None if pid == "-" else int(pid))
    assert got.pid_alive == (alive == "1") and got.session_alive
    assert got.exit_code == (None if code == "-" else int(code))
    assert got.exited_at == (None if exited_at == "-" else float(exited_at))
    assert got.started == (None if start == "-" else float(start))
    assert got.log_size == int(size) and got.output_ok == (None if out == "-" else out == "1")
    assert got.last_line == "hi" and snap.gpus[0].memory_used_mib == 100


@FAST
@given(st.text(max_size=80))
def test_a_garbled_attempt_line_gives_a_failed_snapshot_not_an_error(attempt_line: str) -> None:
    snap = parse_probe("h", _probe_text(attempt_line), BOUNDARY, REQUEST, taken_at=0.0,
                       rtt_s=None)
    if snap.ok:
        assert "j" in snap.attempts
    else:
        assert snap.error == "probe returned nothing for j"


def test_a_whole_probe_parses() -> None:
    line = "A\tj\t42\t1\t1700000000.5\t-\t-\t120\t-"
    snap = parse_probe("h", _probe_text(line), BOUNDARY, REQUEST, taken_at=0.0, rtt_s=0.01)
    assert snap.ok and snap.attempts["j"].session_alive and snap.attempts["j"].pid == 42
    assert snap.attempts["j"].last_line == "hi" and snap.gpus[0].memory_used_mib == 100


@FAST
@given(st.binary(max_size=300))
def test_log_bytes_of_any_kind_clean_to_text(data: bytes) -> None:
    lines = clean_text(data)
    assert all(isinstance(line, str) and "\x1b[" not in line and "\r" not in line
               for line in lines)


@FAST
@given(st.lists(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7e),
                        min_size=1, max_size=40).filter(str.strip), min_size=1, max_size=8))
def test_plain_log_lines_clean_to_themselves(lines: list[str]) -> None:
    """The positive half: a log of plain printable lines comes back as those lines (a cleaner
    that returned nothing would pass the property above alone)."""
    cleaned = clean_text(("\n".join(lines) + "\n").encode())
    assert [line.rstrip() for line in cleaned if line.strip()] == [line.rstrip() for line in lines]


H100_PMON = """\
# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command
# Idx           #    C/G      %      %      %      %      %      %    name
    0        439     C     88      8      -      -      -      -    python3
    0        440     C      -      -      -      -      -      -    python3
"""


def test_pmon_as_an_h100_printed_it_gives_each_process_its_own_utilisation() -> None:
    assert parse_pmon(H100_PMON) == {(0, 439): 88, (0, 440): 0}


@given(st.lists(st.tuples(st.integers(0, 7), st.integers(1, 4_000_000),
                          st.one_of(st.just("-"), st.integers(0, 100).map(str))), max_size=6),
       st.text(max_size=60))
def test_pmon_lines_parse_to_their_figures_and_noise_never_raises(
        rows: list[tuple[int, int, str]], noise: str) -> None:
    text = "\n".join(f"  {gpu} {pid} C {sm} - - - - - python3" for gpu, pid, sm in rows)
    expected = {(gpu, pid): 0 if sm == "-" else int(sm) for gpu, pid, sm in rows}
    assert parse_pmon(text) == expected  # the positive half: every line read back
    parse_pmon(noise + "\n" + text)  # noise around it: never an error
