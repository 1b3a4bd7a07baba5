"""Garbage in, never a traceback: CLI arguments, nvidia-smi output, probe output, log bytes.

`EQ_HYPOTHESIS_EXAMPLES=1000 .venv/bin/pytest tests/test_fuzz.py tests/test_manifest.py` is
the full run; the test command uses the default (200 per target).
"""

from __future__ import annotations

import contextlib
import io
import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from eq_tui.cli import main
from eq_tui.hosts.base import AttemptRef, ProbeRequest
from eq_tui.hosts.gpu_csv import parse_apps, parse_gpus
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
    ["[N/A]", "[Not Supported]", "", "GPU-x", "NVIDIA A100", "1e3", "12 MiB", "99 %"]),
    st.text(max_size=6))


@FAST
@given(st.lists(st.lists(csv_cell, max_size=8).map(", ".join), max_size=6).map("\n".join))
@example("INF, 0, 0\nnan, 1e999, -inf")
def test_odd_nvidia_smi_csv_never_raises(text: str) -> None:
    gpus, warnings = parse_gpus(text)
    apps, app_warnings = parse_apps(text)
    assert all(g.memory_used_mib is None or isinstance(g.memory_used_mib, int) for g in gpus)
    assert isinstance(warnings, list) and isinstance(app_warnings, list) and apps is not None


def _probe_text(attempt_line: str, cut: int) -> str:
    full = (f"{BOUNDARY} sessions\nscreen 123.eq_p_t_j_a1\n{BOUNDARY} gpus\n"
            "0, GPU-a, Sim, 100, 24576, 0\n"
            f"{BOUNDARY} gpus_rc 0\n{BOUNDARY} apps\n{BOUNDARY} apps_rc 0\n"
            f"{BOUNDARY} requests\n{attempt_line}\nL\tj\t6869\n{BOUNDARY} end\n")
    return full[:cut]


@FAST
@given(st.text(max_size=80), st.integers(0, 400))
def test_probe_output_cut_off_or_garbled_gives_a_failed_snapshot_not_an_error(
        attempt_line: str, cut: int) -> None:
    request = ProbeRequest(attempts=(AttemptRef("j", "eq_p_t_j_a1", "/x", None),))
    snap = parse_probe("h", _probe_text(attempt_line, cut), BOUNDARY, request, taken_at=0.0,
                       rtt_s=None)
    if snap.ok:
        assert "j" in snap.attempts
    else:
        assert snap.error


def test_a_whole_probe_parses() -> None:
    request = ProbeRequest(attempts=(AttemptRef("j", "eq_p_t_j_a1", "/x", None),))
    line = "A\tj\t42\t1\t1700000000.5\t-\t-\t120\t-"
    snap = parse_probe("h", _probe_text(line, 10_000), BOUNDARY, request, taken_at=0.0,
                       rtt_s=0.01)
    assert snap.ok and snap.attempts["j"].session_alive and snap.attempts["j"].pid == 42
    assert snap.attempts["j"].last_line == "hi" and snap.gpus[0].memory_used_mib == 100


@FAST
@given(st.binary(max_size=300))
def test_log_bytes_of_any_kind_clean_to_text(data: bytes) -> None:
    lines = clean_text(data)
    assert all(isinstance(line, str) and "\x1b[" not in line and "\r" not in line
               for line in lines)
