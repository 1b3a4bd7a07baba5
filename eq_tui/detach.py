"""`--detach`: start each manifest's engine in the background, wait until it answers on its
control socket, say how to attach and stop it, and return."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from eq_tui.engine.control import ControlClient
from eq_tui.errors import RunDirError
from eq_tui.manifest.secrets import SECRETS_STDIN_FLAG, hand_over_bytes, handed_over, resolve

HEALTHY_WITHIN_S = 60.0


def engine_command(manifest: str, run_dir: Path, poll: float | None,
                   secrets: bool = False, ssh_config: str | None = None) -> list[str]:
    command = [sys.executable, "-m", "eq_tui", manifest, "--no-ui", "--run-dir", str(run_dir)]
    if poll is not None:
        command += ["--poll", str(poll)]
    if ssh_config is not None:
        command += ["--ssh-config", ssh_config]
    if secrets:
        command.append(SECRETS_STDIN_FLAG)
    return command


def _secrets_here(manifests: list[str]) -> list[dict[str, str]]:
    """The secrets this process can read for each manifest (an `attach --resume`)."""
    from eq_tui.manifest.loader import load_manifest

    return [handed_over(resolve(load_manifest(manifest))) for manifest in manifests]


async def _wait_healthy(process: subprocess.Popen[bytes], run_dir: Path) -> bool:
    deadline = time.monotonic() + HEALTHY_WITHIN_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            client = await ControlClient.connect(run_dir)
        except (OSError, ConnectionError, RuntimeError):
            await asyncio.sleep(0.1)
            continue
        await client.close()
        return True
    return False


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no engine log)"


def start_detached(manifests: list[str], run_dirs: list[Path], poll: float | None,
                   secrets: list[dict[str, str]] | None = None, *,
                   ssh_config: str | None = None) -> int:
    """`secrets`: per manifest, the from_env/from_file values to hand to its engine over its
    stdin (None: whatever this process can read)."""
    handed = _secrets_here(manifests) if secrets is None else secrets
    for manifest, run_dir, values in zip(manifests, run_dirs, handed, strict=True):
        run_dir.mkdir(parents=True, exist_ok=True)
        log = run_dir / "engine.log"
        with open(log, "ab") as out:
            process = subprocess.Popen(
                engine_command(manifest, run_dir, poll, bool(values), ssh_config),
                stdin=subprocess.PIPE if values else subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True, cwd=os.getcwd())
        if process.stdin is not None:
            try:
                process.stdin.write(hand_over_bytes(values))
                process.stdin.close()
            except OSError:
                pass  # it died at once: _wait_healthy says so with its log
        if not asyncio.run(_wait_healthy(process, run_dir)):
            code = process.poll()
            if code is None:
                process.terminate()
            raise RunDirError(f"the engine for {manifest} did not come up "
                              f"(exit {code}); last lines of {log}:\n{_log_tail(log)}")
        print(f"eq-tui: engine for {manifest} is running in the background (pid "
              f"{process.pid}); run dir {run_dir}\n"
              f"  watch:  eq-tui attach {run_dir}\n"
              f"  status: eq-tui status {run_dir}\n"
              f"  stop:   eq-tui stop {run_dir}   (jobs keep running; the next run resumes)\n"
              f"  log:    {log}")
    return 0


async def _send_stop(run_dir: Path) -> bool:
    try:
        client = await ControlClient.connect(run_dir)
    except (OSError, ConnectionError, RuntimeError):
        return False
    try:
        await client.command("shutdown")
    except ConnectionError:
        pass
    finally:
        await client.close()
    return True


def stop_engine(run_dir: Path) -> int:
    if not asyncio.run(_send_stop(run_dir)):
        raise RunDirError(f"no engine is running for {run_dir}")
    print(f"eq-tui: asked the engine of {run_dir} to stop; its jobs keep running")
    return 0
