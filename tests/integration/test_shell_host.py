"""ShellHost end to end on this machine: real screen and tmux, simulated GPUs, private sockets.

tests/integration/test_host_shell.py covers the screen path of launch/probe/kill/tail; this
file adds tmux, signals, conda activation, preflight, failed launches, probe cost and the
runner's edges.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from eq_tui.errors import HostError
from eq_tui.hosts.base import (
    AttemptProbe,
    AttemptRef,
    HostSnapshot,
    LauncherName,
    LaunchRequest,
    PathCheck,
    PreflightRequest,
    ProbeRequest,
)
from eq_tui.hosts.local import LocalRunner, make_local_host
from eq_tui.hosts.logclean import clean_line, clean_text
from eq_tui.hosts.nvml import NvmlReader
from eq_tui.hosts.runner import CommandResult
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.sim.state import init_sim_state, set_foreign, sim_bin_dir
from tests.support.polling import wait_until

pytestmark = pytest.mark.integration

LAUNCHERS: tuple[LauncherName, ...] = ("screen", "tmux")


@dataclass
class Bed:
    host: ShellHost
    tmp: Path
    env: dict[str, str]
    prefix: str
    started: list[tuple[LauncherName, str, str]] = field(default_factory=list)

    def request(self, job: str, cmd: str, *, launcher: LauncherName = "screen",
                env: dict[str, str] | None = None, **changes: object) -> LaunchRequest:
        base = LaunchRequest(
            job_id=job, attempt=1, session=f"{self.prefix}{job}_a1",
            attempt_dir=str(self.tmp / "logs" / job / "a1"), cwd=str(self.tmp), cmd=cmd,
            gpus=(0,), env={"CUDA_VISIBLE_DEVICES": "0", **(env or {})}, conda=None,
            conda_hook=None, launcher=launcher)
        return replace(base, **changes)  # type: ignore[arg-type]

    async def launch(self, request: LaunchRequest, host: ShellHost | None = None) -> AttemptRef:
        self.started.append((request.launcher, request.session, request.attempt_dir))
        await (host or self.host).launch(request)
        return AttemptRef(request.job_id, request.session, request.attempt_dir, None)

    async def probe(self, *refs: AttemptRef) -> dict[str, AttemptProbe]:
        snap = await self.host.probe(ProbeRequest(attempts=refs, cwd=str(self.tmp)))
        assert snap.ok, snap.error
        return snap.attempts

    async def finished(self, ref: AttemptRef, timeout: float = 10.0) -> AttemptProbe:
        result: list[AttemptProbe] = []

        async def done() -> bool:
            probe = (await self.probe(ref))[ref.key]
            result[:] = [probe]
            return probe.exit_code is not None and not probe.session_alive

        await wait_until(done, timeout, f"{ref.key} to finish")
        return result[0]


def environment(tmp: Path, sockets: Path, *, path_first: Sequence[Path] = ()) -> dict[str, str]:
    state = init_sim_state(tmp / "sim", host="t", gpus=2, memory_mib=8000)
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "STY")}
    env["PATH"] = os.pathsep.join([*map(str, path_first), str(sim_bin_dir()), env["PATH"]])
    env["EQ_SIM_STATE"] = str(state)
    env["SCREENDIR"] = str(sockets / "screen")
    env["TMUX_TMPDIR"] = str(sockets / "tmux")
    return env


@pytest.fixture
def sockets() -> Iterator[Path]:
    # short and private: socket paths must stay under 108 bytes, and screen wants mode 700
    path = Path(tempfile.mkdtemp(prefix="eqsh-"))
    for name in ("screen", "tmux"):
        (path / name).mkdir(mode=0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def bed(tmp_path: Path, sockets: Path) -> AsyncIterator[Bed]:
    env = environment(tmp_path, sockets)
    prefix = f"eqt_{secrets.token_hex(3)}_"
    host = ShellHost("t", LocalRunner(env), log_dir=str(tmp_path / "logs"), session_prefix=prefix)
    bed = Bed(host, tmp_path, env, prefix)
    yield bed
    for launcher, session, directory in bed.started:
        await host.kill(session, directory, launcher)
    snap = await host.probe(ProbeRequest())
    assert not snap.sessions, f"sessions left behind: {sorted(snap.sessions)}"


def fake_tool(directory: Path, name: str, body: str) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return directory


# ---- launch and probe ----------------------------------------------------------------------


@pytest.mark.parametrize("launcher", LAUNCHERS)
async def test_exit_code_is_the_commands_own_and_signals_are_128_plus(
        bed: Bed, launcher: LauncherName) -> None:
    piped = await bed.launch(bed.request(
        "piped", "echo \"order=$CUDA_DEVICE_ORDER dev=$CUDA_VISIBLE_DEVICES "
        "unbuf=$PYTHONUNBUFFERED\"; sh -c 'exit 3'",
        launcher=launcher, env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PYTHONUNBUFFERED": "1"}))
    signalled = await bed.launch(bed.request("sig", "kill -TERM $$", launcher=launcher))
    probe = await bed.finished(piped)
    assert probe.exit_code == 3 and probe.pid is not None and probe.started is not None
    assert probe.exited_at is not None and probe.log_size > 0
    assert "order=PCI_BUS_ID dev=0 unbuf=1" in probe.log_tail
    assert (await bed.finished(signalled)).exit_code == 128 + 15
    with pytest.raises(HostError, match="already exists"):
        await bed.host.launch(bed.request("piped", "true", launcher=launcher))


async def test_tmux_job_gets_env_values_verbatim_and_secrets_stay_off_disk_and_ps(
        bed: Bed) -> None:
    secret = f"tok-{secrets.token_hex(8)}"
    nasty = {"Q": "it's", "S": "$(touch pwned1)", "B": "`touch pwned2`", "C": "; touch pwned3",
             "N": "two\nlines", "TOKEN": secret}
    show = "; ".join(f'printf "%s|" "${name}"' for name in nasty if name != "TOKEN")
    ref = await bed.launch(bed.request(
        "env", f'{show}; [ ${{#TOKEN}} -eq {len(secret)} ] && echo; echo seen; sleep 30',
        launcher="tmux", env=nasty))

    async def seen() -> bool:
        log = bed.tmp / "logs" / "env" / "a1" / "log"  # tee creates it just after the launch
        return log.exists() and "seen" in log.read_text(errors="replace")

    await wait_until(seen, what="the job to read its environment")
    for path in bed.tmp.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    assert secret not in ps.stdout
    await bed.host.kill(ref.session, ref.attempt_dir, "tmux")
    log = (bed.tmp / "logs" / "env" / "a1" / "log").read_text()
    assert log.startswith("it's|$(touch pwned1)|`touch pwned2`|; touch pwned3|two\nlines|\n")
    assert not list(bed.tmp.rglob("pwned*")) and not list(Path.cwd().glob("pwned*"))


async def test_tmux_jobs_run_on_eq_tuis_own_server_with_the_launchs_environment(
        bed: Bed) -> None:
    """A person's own tmux server never gets our sessions, and a job's environment is its
    launch's, never that of the server that was already running (here: started earlier with
    a variable this launch does not have)."""
    person = subprocess.run(["tmux", "new-session", "-d", "-s", "mine", "sleep 60"],
                            env=bed.env, capture_output=True)
    assert person.returncode == 0, person.stderr
    earlier = dict(bed.env, STALE="from-the-server")
    subprocess.run(["tmux", "-L", "eq-tui", "new-session", "-d", "-s", "keep", "sleep 60"],
                   env=earlier, check=True)
    host = ShellHost("t", LocalRunner(dict(bed.env, FRESH="from-the-launch")),
                     session_prefix=bed.prefix)
    try:
        ref = await bed.launch(bed.request(
            "own", 'echo "stale=${STALE:-} fresh=${FRESH:-} dev=$CUDA_VISIBLE_DEVICES"',
            launcher="tmux"), host)
        probe = await bed.finished(ref)
        assert "stale= fresh=from-the-launch dev=0" in probe.log_tail
        listed = subprocess.run(["tmux", "list-sessions", "-F", "#{session_name}"],
                                env=bed.env, capture_output=True, text=True).stdout.split()
        assert listed == ["mine"]
        running = await bed.launch(bed.request("own2", "sleep 30", launcher="tmux"), host)
        ours = subprocess.run(["tmux", "-L", "eq-tui", "list-sessions", "-F",
                               "#{session_name}"], env=bed.env, capture_output=True,
                              text=True).stdout.split()
        assert running.session in ours and "keep" in ours
        assert (await bed.probe(running))["own2"].session_alive
    finally:
        for socket in (["-L", "eq-tui"], []):
            subprocess.run(["tmux", *socket, "kill-server"], env=bed.env, capture_output=True)


async def test_a_missing_working_directory_is_said_in_the_log(bed: Bed) -> None:
    ref = await bed.launch(bed.request("nocwd", "true", cwd=str(bed.tmp / "gone")))
    probe = await bed.finished(ref)
    assert probe.exit_code == 2
    assert "working directory" in probe.log_tail and "does not exist" in probe.log_tail


@pytest.mark.parametrize("launcher", LAUNCHERS)
async def test_kill_of_s1_leaves_s10_alive(bed: Bed, launcher: LauncherName) -> None:
    s1 = await bed.launch(bed.request("s1", "sleep 60", launcher=launcher))
    s10 = await bed.launch(bed.request("s10", "sleep 60", launcher=launcher))
    assert s10.session.startswith(s1.session[: -len("_a1")])
    await bed.host.kill(s1.session, s1.attempt_dir, launcher)
    await bed.host.kill(s1.session, s1.attempt_dir, launcher)  # idempotent
    probes = await bed.probe(s1, s10)
    assert not probes["s1"].session_alive and not probes["s1"].pid_alive
    assert probes["s10"].session_alive and probes["s10"].pid_alive


@pytest.mark.parametrize("launcher", LAUNCHERS)
async def test_a_stale_session_shows_exit_record_and_live_session(
        bed: Bed, launcher: LauncherName) -> None:
    ref = await bed.launch(bed.request("stale", "(sleep 60 &); exit 0", launcher=launcher))
    probes: dict[str, AttemptProbe] = {}

    async def exited() -> bool:
        probes.update(await bed.probe(ref))
        return probes["stale"].exit_code is not None

    await wait_until(exited, what="the exit record")
    assert probes["stale"].exit_code == 0 and probes["stale"].session_alive
    assert not probes["stale"].pid_alive
    await bed.host.kill(ref.session, ref.attempt_dir, launcher)
    assert not (await bed.probe(ref))["stale"].session_alive


async def test_a_session_that_never_starts_fails_the_launch_fast(bed: Bed) -> None:
    # claims to start the session, starts nothing
    broken = fake_tool(bed.tmp / "broken", "tmux",
                       'case " $* " in *" new-session "*) exit 0;; esac\nexit 1\n')
    env = dict(bed.env, PATH=f"{broken}{os.pathsep}{bed.env['PATH']}")
    host = ShellHost("t", LocalRunner(env), session_prefix=bed.prefix)
    # the message is the fast path's (the session is seen gone), not the start timeout's
    with pytest.raises(HostError, match="ended before its wrapper started"):
        await host.launch(bed.request("never", "true", launcher="tmux"))
    assert not (bed.tmp / "logs" / "never" / "a1" / "env.fifo").exists()


@pytest.mark.parametrize("how", ["hook_file", "conda_on_path"])
async def test_conda_env_is_activated_before_the_command(bed: Bed, how: str) -> None:
    activate = ('conda() { [ "$1" = activate ] && export CONDA_DEFAULT_ENV="$2"; }\n')
    hook: str | None = None
    env = bed.env
    if how == "hook_file":
        hook = str(bed.tmp / "conda hook.sh")
        Path(hook).write_text(activate)
    else:  # a bare conda executable: the wrapper asks it for its POSIX shell hook
        tools = fake_tool(bed.tmp / "condabin", "conda",
                          f"[ \"$1 $2\" = 'shell.posix hook' ] && cat <<'EOF'\n{activate}EOF\n")
        env = dict(bed.env, PATH=f"{tools}{os.pathsep}{bed.env['PATH']}")
    host = ShellHost("t", LocalRunner(env), session_prefix=bed.prefix)
    ref = await bed.launch(replace(bed.request("conda", 'echo "env=$CONDA_DEFAULT_ENV"'),
                                   conda="my env", conda_hook=hook), host)
    probe = await bed.finished(ref)
    assert probe.exit_code == 0 and "env=my env" in probe.log_tail


# ---- probe output -------------------------------------------------------------------------


class RecordingRunner:
    def __init__(self, inner: LocalRunner, cut: int | None = None) -> None:
        self.inner, self.cut, self.stdout = inner, cut, b""

    async def run(self, script: str, args: Sequence[str] = (), *, stdin: bytes = b"",
                  timeout: float | None = 30.0) -> CommandResult:
        result = await self.inner.run(script, args, stdin=stdin, timeout=timeout)
        self.stdout = result.stdout if self.cut is None else result.stdout[: self.cut]
        return CommandResult(result.returncode, self.stdout, result.stderr)

    async def close(self) -> None:
        return None


async def test_probe_cost_does_not_grow_with_finished_jobs_not_sent(bed: Bed) -> None:
    runner = RecordingRunner(LocalRunner(bed.env))
    host = ShellHost("t", runner, session_prefix=bed.prefix, query_gpus=False)
    live = await bed.launch(bed.request("live", "sleep 60"))
    request = ProbeRequest(attempts=(live,), cwd=str(bed.tmp))

    async def started() -> bool:  # its records complete: the next probe answers the same
        probe = (await host.probe(request)).attempts["live"]
        return probe.session_alive and probe.started is not None and probe.pid is not None

    await wait_until(started, what="the live attempt's start records")
    before = len(runner.stdout)
    for i in range(200):
        done = bed.tmp / "logs" / f"old{i}" / "a1"
        done.mkdir(parents=True)
        for name, text in (("pid", "1"), ("start", "1.0"), ("exit", "0"), ("log", "x" * 500)):
            (done / name).write_text(text)
    snap = await host.probe(request)
    assert list(snap.attempts) == ["live"] and len(runner.stdout) == before


LOGS: dict[str, bytes] = {
    "plain": b"epoch 1\nepoch 2 loss=0.5\n",
    "bar": b"epoch 3\n 10%|#   | 1/10\r 20%|##  | 2/10\r",  # a progress bar: \r ends its lines
    "unended": b"first\nno newline at the end",
    "blank_tail": b"the last words\n\n   \n\t\n",
    "empty": b"",
    # a log cannot forge the line that names the next attempt: the probe's boundary is new
    "forger": b"@@eq-0000000000000000 plain\nreal last line\n",
    "long": b"x" * 5000 + b"\nafter five thousand bytes\n",
    "spaced dir": b"in a directory with a space\n",
}


async def test_many_running_attempts_get_their_sizes_and_last_lines_in_one_probe(
        bed: Bed) -> None:
    """probe.sh reads every log's size with one wc and the running ones' last lines with one
    awk: each attempt still gets its own, whatever its neighbours' logs hold, and one whose
    log is missing or that has exited is read as before."""
    refs = []
    for name, text in {**LOGS, "missing": None, "exited": b"done\n"}.items():
        attempt = bed.tmp / "logs" / name / "a1"
        attempt.mkdir(parents=True)
        if text is not None:
            (attempt / "log").write_bytes(text)
        if name == "exited":
            (attempt / "exit").write_text("0\n")
        refs.append(AttemptRef(name.replace(" ", "_"), f"{bed.prefix}{name}", str(attempt), None))
    host = ShellHost("t", LocalRunner(bed.env), session_prefix=bed.prefix, query_gpus=False)
    snap = await host.probe(ProbeRequest(attempts=tuple(refs), cwd=str(bed.tmp)))
    assert snap.ok, snap.error
    sizes = {key: probe.log_size for key, probe in snap.attempts.items()}
    assert sizes == {**{name.replace(" ", "_"): len(text) for name, text in LOGS.items()},
                     "missing": 0, "exited": 5}
    last = {key: probe.last_line for key, probe in snap.attempts.items()}
    assert last == {
        "plain": "epoch 2 loss=0.5", "bar": " 20%|##  | 2/10", "unended": "no newline at the end",
        "blank_tail": "the last words", "empty": "", "forger": "real last line",
        "long": "after five thousand bytes", "spaced_dir": "in a directory with a space",
        "missing": "", "exited": ""}
    assert snap.attempts["exited"].exit_code == 0 and snap.attempts["exited"].log_tail == "done\n"


@pytest.mark.parametrize("cut", [0, 20, -12])
async def test_cut_off_probe_output_is_a_failed_snapshot_not_an_exception(
        bed: Bed, cut: int) -> None:
    ref = await bed.launch(bed.request("cut", "echo hi; sleep 60"))
    full = RecordingRunner(LocalRunner(bed.env))
    await ShellHost("t", full, session_prefix=bed.prefix).probe(ProbeRequest(attempts=(ref,)))
    runner = RecordingRunner(LocalRunner(bed.env), cut=cut % len(full.stdout))
    snap = await ShellHost("t", runner, session_prefix=bed.prefix).probe(
        ProbeRequest(attempts=(ref,)))
    assert not snap.ok and snap.error


async def test_an_unreachable_host_is_a_failed_snapshot() -> None:
    class Down:
        async def run(self, script: str, args: Sequence[str] = (), *, stdin: bytes = b"",
                      timeout: float | None = 30.0) -> CommandResult:
            raise HostError("connection refused")

        async def close(self) -> None:
            return None

    snap = await ShellHost("down", Down()).probe(ProbeRequest())
    assert not snap.ok and snap.error == "connection refused" and snap.host == "down"


@pytest.mark.parametrize(("smi", "warning"), [
    (None, "nvidia-smi failed (exit 127)"),
    ("echo '0, GPU-a, T4, [Not Supported], [N/A], [N/A]'\necho '1, GPU-b'\n",
     "memory.used is '[Not Supported]'"),
    ("printf '\\n\\n'\n", "listed no GPUs"),
])
async def test_odd_or_missing_nvidia_smi_gives_warnings(tmp_path: Path, smi: str | None,
                                                        warning: str) -> None:
    path = "/usr/bin:/bin"
    if smi is not None:
        tools = fake_tool(tmp_path / "bin", "nvidia-smi",
                          'case "$*" in *compute-apps*) echo "[N/A], GPU-a, [N/A]";; *)\n'
                          f"{smi};; esac\n")
        path = f"{tools}:{path}"
    snap = await ShellHost("odd", LocalRunner(dict(os.environ, PATH=path))).probe(ProbeRequest())
    assert snap.ok, snap.error
    assert any(warning in w for w in snap.warnings), snap.warnings
    assert all(gpu.memory_used_mib is None for gpu in snap.gpus)


# ---- preflight, tail, runner, factories ---------------------------------------------------


async def test_preflight_names_each_check_and_each_precondition(bed: Bed) -> None:
    (bed.tmp / "ckpt").mkdir()
    (bed.tmp / "ckpt" / "teacher_N64.pt").write_text("")
    findings = await bed.host.preflight(PreflightRequest(
        cwd=str(bed.tmp), conda=None, conda_hook=None, launcher="tmux",
        preconditions=(PathCheck("a#0", "ckpt/teacher_N*.pt"),
                       PathCheck("b#0", "ckpt/teacher_N128.pt"))))
    by_check = {(f.check, f.job): f for f in findings}
    assert all(f.host == "t" for f in findings)
    assert by_check[("cwd", None)].ok and by_check[("launcher", None)].ok
    # the launcher and its version, never its usage text
    assert re.fullmatch(r"tmux \d\S*", by_check[("launcher", None)].detail)
    assert by_check[("nvidia-smi", None)].ok and "2 GPU(s)" in by_check[("nvidia-smi", None)].detail
    assert by_check[("precondition", "a#0")].ok
    assert not by_check[("precondition", "b#0")].ok
    assert "ckpt/teacher_N128.pt" in by_check[("precondition", "b#0")].detail

    findings = await bed.host.preflight(PreflightRequest(
        cwd=str(bed.tmp / "missing"), conda="nope", conda_hook=str(bed.tmp / "no-hook.sh"),
        launcher="screen", preconditions=(PathCheck("a#0", "ckpt/teacher_N*.pt"),)))
    failed = {f.check for f in findings if not f.ok}
    assert failed == {"cwd", "conda", "precondition"}  # relative globs need the cwd
    launcher = next(f for f in findings if f.check == "launcher")
    assert re.fullmatch(r"screen \d+\.\d+\S*", launcher.detail), launcher.detail


async def test_tail_cleans_ansi_progress_bars_and_bad_bytes(bed: Bed) -> None:
    ref = await bed.launch(bed.request(
        "bar", r"printf '\033[1;31mred\033[0m\nep 1\r\033[2Kep 2\rep 3\n\377ok\n'"))
    await bed.finished(ref)
    assert await bed.host.tail(ref.attempt_dir, 2) == ["ep 3", "\ufffdok"]
    assert await bed.host.tail(ref.attempt_dir, 10) == ["red", "ep 3", "\ufffdok"]
    assert clean_line("50%\r") == "50%" and clean_line("\x1b]0;title\x07text") == "text"
    assert clean_text("a\r\nb\n") == ["a", "b"]


async def test_local_runner_times_out_with_a_host_error(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    with pytest.raises(HostError, match="longer than"):
        await LocalRunner().run('echo $$ > "$1"; sleep 30 & echo $! >> "$1"; sleep 30; wait',
                                [str(pids)], timeout=0.3)
    # it did not wait for them: the shell and the child it left in the background are killed
    started = [int(pid) for pid in pids.read_text().split()]
    assert len(started) == 2

    def running(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
        except OSError:
            return False

    async def all_gone() -> bool:
        return not any(running(pid) for pid in started)

    await wait_until(all_gone, what="the timed-out command's processes to be killed")
    result = await LocalRunner().run('printf "%s|" "$@"; cat', ["a b", "$(x)"], stdin=b"in")
    assert result.returncode == 0 and result.stdout == b"a b|$(x)|in"


async def test_log_root_expands_home_once() -> None:
    home = os.path.expanduser("~")
    assert await ShellHost("h", LocalRunner(), log_dir="~/runs/").log_root("p", "t1") == \
        f"{home}/runs/p-t1"
    assert await ShellHost("h", LocalRunner()).log_root("p", "t1") == \
        f"{home}/.eq-tui/p-t1/logs"
    assert await ShellHost("h", LocalRunner(), log_dir="/abs").log_root("p", "t") == "/abs/p-t"


def test_local_host_falls_back_to_nvidia_smi_without_a_driver(tmp_path: Path) -> None:
    host = make_local_host("here", str(tmp_path))
    if NvmlReader.open() is None:  # these machines: no NVIDIA driver
        assert host.gpu_reader is None and host.query_gpus
    else:
        assert host.gpu_reader is not None and not host.query_gpus


async def test_the_probe_asks_ps_only_about_gpu_processes_that_are_there(
        tmp_path: Path, sockets: Path) -> None:
    """Who holds a GPU process that is not one of our attempts' comes from one ps, asked only
    about the processes that exist: not about an ended job whose memory the driver still
    frees (a ps in every probe of a busy host, for nothing), nor about a pid from another pid
    namespace (a container's nvidia-smi lists the host's). Both are still reported, with no
    owner; a live outsider gets its user and command."""
    calls = tmp_path / "ps-calls"
    tools = fake_tool(tmp_path / "tools", "ps",
                      f'echo "$*" >> {calls}\nexec {shutil.which("ps")} "$@"\n')
    env = environment(tmp_path, sockets, path_first=[tools])
    set_foreign(env["EQ_SIM_STATE"], [{"gpu": 1, "mib": 300}])
    prefix = f"eqt_{secrets.token_hex(3)}_"
    host = ShellHost("t", LocalRunner(env), log_dir=str(tmp_path / "logs"), session_prefix=prefix)
    bed = Bed(host, tmp_path, env, prefix)
    ended = await bed.launch(bed.request(
        "ended", "fake-train --epochs 1 --epoch-seconds 0.05 --mem 1200 --linger 600"))
    await bed.finished(ended)
    outsider = subprocess.Popen(
        ["fake-train", "--epochs", "600", "--epoch-seconds", "0.5", "--mem", "700"],
        env={**env, "CUDA_VISIBLE_DEVICES": "1"}, stdout=subprocess.DEVNULL)
    try:
        found: list[HostSnapshot] = []

        async def all_three() -> bool:
            snap = await host.probe(ProbeRequest(attempts=(ended,), cwd=str(tmp_path)))
            found[:] = [snap]
            return len(snap.processes) == 3

        await wait_until(all_three, what="the lingering, the foreign and the live process")
        by_mib = {p.used_mib: p for p in found[0].processes}
        assert by_mib[700].pid == outsider.pid and by_mib[700].running
        assert "fake-train" in by_mib[700].command
        assert not by_mib[1200].running and not by_mib[300].running
        asked = calls.read_text().split()
        assert asked.count("-p") == 1 and asked[asked.index("-p") + 1] == str(outsider.pid)
    finally:
        outsider.kill()
        outsider.wait()
        await host.kill(ended.session, ended.attempt_dir, "screen")


@pytest.mark.parametrize("launcher", ["screen", "tmux"])
async def test_the_probe_ties_a_gpu_process_to_its_attempt_by_process_group(
        bed: Bed, launcher: LauncherName) -> None:
    """A job's GPU processes (a child included) carry the attempt's process group and session,
    so its memory is counted for it; the host's core count comes when asked."""
    cmd = ("fake-train --epochs 40 --epoch-seconds 0.25 --mem 1500 & "
           "fake-train --epochs 40 --epoch-seconds 0.25 --mem 700; wait")
    ref = await bed.launch(bed.request("tree", cmd, launcher=launcher))
    request = ProbeRequest(attempts=(ref,), cwd=str(bed.tmp), cores=True)
    found: list[HostSnapshot] = []

    async def both_allocated() -> bool:
        snap = await bed.host.probe(request)
        found[:] = [snap]
        return len(snap.processes) == 2

    await wait_until(both_allocated, what="both processes on the GPU")
    snap = found[0]
    group = snap.attempts["tree"].pgid
    assert group is not None and group > 1
    assert {p.used_mib for p in snap.processes} == {1500, 700}
    assert all(group in (p.pgid, p.sid) for p in snap.processes)
    # an attempt's own processes are matched from /proc by the shell (no ps): their user and
    # command are never shown (the grid names the job); someone else's still come from ps
    assert all(p.running and p.command == "" for p in snap.processes)
    assert snap.cores == os.cpu_count()
    plain = await bed.host.probe(ProbeRequest(attempts=(ref,), cwd=str(bed.tmp)))
    assert plain.cores is None


async def test_launches_as_the_last_tmux_session_ends_all_start(bed: Bed) -> None:
    """A tmux server exits with its last session, and a client that reaches it then is told
    "server exited unexpectedly" (about one launch in five, back to back with instant jobs on
    the bed's server of its own). The launch starts the session on a fresh server instead of
    failing, and never twice."""
    # each job ends a little later than the last: one of them ends as the next launch connects
    refs = [await bed.launch(bed.request(f"quick{i}", f"sleep {i / 200:.3f}", launcher="tmux"))
            for i in range(40)]
    for ref in refs:
        assert (await bed.finished(ref)).exit_code == 0
        assert Path(ref.attempt_dir, "start").read_text().strip()  # its wrapper ran, once
