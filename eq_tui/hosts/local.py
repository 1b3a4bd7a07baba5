"""This machine as a host: the same shell snippets through a local subprocess.

A simulated host is a local host whose PATH starts with the sim's `nvidia-smi` and
`fake-train`, with its own GPU state dir and its own screen/tmux socket dirs, so several
simulated hosts on one machine never see each other's GPUs or sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import tempfile
from collections.abc import Sequence
from pathlib import Path

from eq_tui.errors import HostError
from eq_tui.hosts.runner import CommandResult, LineStream
from eq_tui.hosts.shell_host import ShellHost


class LocalRunner:
    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.env = env

    async def _start(self, script: str, args: Sequence[str],
                     stderr: int) -> asyncio.subprocess.Process:
        """`sh -c script` in a session of its own (a timeout kills its whole group)."""
        try:
            return await asyncio.create_subprocess_exec(
                "sh", "-c", script, "eq-tui", *args, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=stderr, env=self.env,
                start_new_session=True)
        except OSError as exc:
            raise HostError(f"cannot run sh: {exc}") from exc

    async def run(self, script: str, args: Sequence[str] = (), *, stdin: bytes = b"",
                  timeout: float | None = 30.0) -> CommandResult:
        process = await self._start(script, args, stderr=asyncio.subprocess.PIPE)
        try:
            async with asyncio.timeout(timeout):
                out, err = await process.communicate(stdin)
        except TimeoutError:
            # the whole group: a hung nvidia-smi or ps under the script goes too (screen and
            # tmux servers start their own sessions, so running jobs are never in it)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
            raise HostError(f"a local command took longer than {timeout} s") from None
        return CommandResult(process.returncode or 0, out, err)

    async def stream(self, script: str, args: Sequence[str] = (), *,
                     stdin: bytes = b"") -> LineStream:
        process = await self._start(script, args, stderr=asyncio.subprocess.DEVNULL)
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(stdin)
            await process.stdin.drain()
        process.stdin.close()
        return _ProcessStream(process)

    async def close(self) -> None:
        return None


class _ProcessStream:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    async def readline(self) -> bytes:
        assert self._process.stdout is not None
        try:
            return await self._process.stdout.readline()
        except (ValueError, asyncio.LimitOverrunError):  # an over-long line: not ours
            return b""

    async def close(self) -> None:
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)
        await self._process.wait()


def _private_dir(kind: str, key: str) -> str:
    """A short, private directory for sockets: screen and tmux socket paths must stay under
    the 108-byte Unix socket limit whatever the run dir's path."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"eq-tui-{os.getuid()}" / f"{kind}-{digest}"
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.mkdir(mode=0o700, exist_ok=True)
    path.chmod(0o700)  # screen refuses a SCREENDIR others can read
    return str(path)


def make_local_host(name: str, log_dir: str, *, claims_dir: str | None = None,
                    rules: str | None = None) -> ShellHost:
    from eq_tui.hosts.nvml import NvmlReader

    reader = NvmlReader.open()
    return ShellHost(name, LocalRunner(), log_dir=log_dir,
                     gpu_reader=reader.read if reader is not None else None,
                     claims_dir=claims_dir, rules=rules)


def sim_environment(sim_state_dir: str) -> dict[str, str]:
    from eq_tui.sim.state import sim_bin_dir

    env = dict(os.environ)
    env["PATH"] = f"{sim_bin_dir()}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env["EQ_SIM_STATE"] = sim_state_dir
    env["SCREENDIR"] = _private_dir("screen", sim_state_dir)
    env["TMUX_TMPDIR"] = _private_dir("tmux", sim_state_dir)
    # the simulated GPUs' claims and lab rules are theirs alone, never this machine's
    env["EQ_TUI_CLAIMS"] = str(Path(sim_state_dir) / "claims")
    env["EQ_TUI_RULES"] = str(Path(sim_state_dir) / "rules.yaml")
    env.pop("TMUX", None)  # started from inside tmux: still use our own server
    env.pop("STY", None)
    return env


def make_sim_host(name: str, sim_state_dir: str, log_dir: str, *,
                  claims_dir: str | None = None, rules: str | None = None) -> ShellHost:
    return ShellHost(name, LocalRunner(sim_environment(sim_state_dir)), log_dir=log_dir,
                     claims_dir=claims_dir, rules=rules)
