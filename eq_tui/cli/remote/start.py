"""Start an engine on an SSH host, detached: `eq-tui MANIFEST --detach --on HOST`, the
resume offered when attaching to a run dir whose engine is not running there, and the one a
shell verb starts for its command."""

from __future__ import annotations

import posixpath
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from eq_tui import __version__
from eq_tui.cli.detach import AWAIT_COMMAND_S, FINISHED_MARK, RESUMING_MARK
from eq_tui.cli.remote.link import RemoteLink, RemoteRunDir
from eq_tui.cli.remote.shell import remote_script
from eq_tui.cli.remote.target import RemoteTarget, command_line
from eq_tui.errors import HostError, RunDirError
from eq_tui.manifest.secret_copy import ManifestCopy, copy_without_secrets
from eq_tui.manifest.secrets import SECRETS_STDIN_FLAG, hand_over_bytes, values_here
from eq_tui.manifest.ssh_target import parse_ssh_target

RUNS_DIR = ".eq-tui/runs"  # under the login user's home on the host
START_TIMEOUT_S = 150.0    # the remote --detach waits up to a minute for its engine


def ssh_command(host: str, config_path: str | None) -> list[str]:
    """The OpenSSH command line that reaches `host` the way eq-tui does."""
    command = ["ssh"]
    if config_path:
        command += ["-F", config_path]
    target = parse_ssh_target(host)
    if target is None:  # checked on the command line already; ssh will say what is wrong
        return [*command, host]
    if target.port is not None:
        command += ["-p", str(target.port)]
    return [*command, target.login]


async def find_eq_tui(link: RemoteLink, config_path: str | None) -> str:
    result = await link.run(remote_script("find_eq_tui.sh"))
    lines = result.stdout.decode(errors="replace").splitlines()
    if result.returncode == 127 or not lines:
        install = shlex.join([*ssh_command(link.target, config_path),
                              f"python3 -m pip install --user eq-tui=={__version__}"])
        raise HostError(
            f"eq-tui is not installed on {link.target}: no `eq-tui` on the PATH of a command "
            f"run over ssh there, nor in ~/.local/bin. Install it there (Python 3.11 or newer; "
            f"this is eq-tui {__version__}), then run this command again:\n"
            f"  {install}\n"
            f"or, on {link.target}, from a copy of the eq-tui source: "
            f"python3 -m pip install --user ./eq-tui")
    remote_version = lines[1].removeprefix("eq-tui ").strip() if len(lines) > 1 else "?"
    if remote_version != __version__:
        print(f"eq-tui: note: {link.target} has eq-tui {remote_version}, this is {__version__}",
              file=sys.stderr)
    return lines[0]


def manifest_copy(manifest: Path) -> ManifestCopy:
    """What the host gets of the manifest: its bytes without the values of the secrets written
    in it (those are handed over with the others, over the SSH channel)."""
    try:
        data = manifest.read_bytes()
    except OSError as exc:
        raise HostError(f"{manifest}: cannot read it to send it: {exc}") from None
    return copy_without_secrets(data, str(manifest))


async def upload_manifest(link: RemoteLink, manifest: Path, data: bytes, project: str) -> str:
    """Writes `data` (the manifest's copy) to ~/.eq-tui/runs/PROJECT/ on the host under the
    manifest's name; returns that directory."""
    result = await link.run(remote_script("upload.sh"), [RUNS_DIR, project, manifest.name],
                            stdin=data)
    if result.returncode != 0:
        raise HostError(f"{link.target}: cannot write ~/{RUNS_DIR}/{project}/{manifest.name}: "
                        f"{result.stderr.decode(errors='replace').strip()}")
    return result.stdout.decode(errors="surrogateescape").strip()


@dataclass(frozen=True)
class StartOutcome:
    """What `eq-tui MANIFEST --detach` said on the host: the run resumed (how far it got), or
    had already finished (then `exit_code` is its queue's and no engine runs)."""

    resuming: str = ""  # "RUN_DIR: 12 of 40 jobs done"
    finished: str = ""  # "RUN_DIR has finished (completed 38, stuck 2; exit 1)"
    exit_code: int = 0


def parse_started(stdout: str, returncode: int) -> StartOutcome:
    resuming = finished = ""
    for line in stdout.splitlines():
        if line.startswith(RESUMING_MARK):
            resuming = line[len(RESUMING_MARK):].strip()
        elif line.startswith(FINISHED_MARK):
            finished = line[len(FINISHED_MARK):].split(": nothing to run", 1)[0].strip()
            finished = finished.removeprefix("the run in ")
    return StartOutcome(resuming=resuming, finished=finished, exit_code=returncode)


async def start_engine(link: RemoteLink, eq_tui: str, manifest: str, run_dir: str,
                       extra: list[str], secrets: dict[str, str] | None = None) -> StartOutcome:
    """Runs `eq-tui MANIFEST --detach` in the manifest's directory on the host (an absolute
    path there): it returns once the engine answers on its control socket (or says the run
    has finished), or fails with the engine's log tail. `secrets` travel on the SSH channel's
    stdin, never on a command line."""
    directory = posixpath.dirname(manifest) or "/"
    if secrets:
        extra = [*extra, SECRETS_STDIN_FLAG]
    result = await link.run(remote_script("start.sh"),
                            [eq_tui, directory, run_dir, manifest, *extra],
                            stdin=hand_over_bytes(secrets) if secrets else b"",
                            timeout=START_TIMEOUT_S)
    started = parse_started(result.stdout.decode(errors="replace"), result.returncode)
    if result.returncode != 0 and not started.finished:
        said = (result.stderr or result.stdout).decode(errors="replace").strip()
        error = RunDirError if result.returncode == 3 else HostError
        raise error(f"{link.target}: the engine did not start (exit {result.returncode}):\n{said}")
    return started


async def resume(link: RemoteLink, run_dir: RemoteRunDir, config_path: str | None,
                 extra: Sequence[str] = ()) -> None:
    """Starts the engine of an existing remote run dir again, from its manifest copy there
    (`extra`: flags for its --detach, e.g. --await-command)."""
    saved = await link.read_json(posixpath.join(run_dir.path, "manifest.json"))
    source = saved.get("source") if isinstance(saved, dict) else None
    if not isinstance(source, str) or not source:
        raise RunDirError(f"{run_dir}: no manifest.json says which manifest it ran; start it "
                          f"with `eq-tui MANIFEST --detach --on {link.target} "
                          f"--run-dir {shlex.quote(run_dir.path)}`")
    if not posixpath.isabs(source):
        raise RunDirError(f"{run_dir}: its manifest.json names {source!r}, a relative path; "
                          f"start it on {link.target} from the directory it ran in")
    eq_tui = await find_eq_tui(link, config_path)
    values, _lacking = values_here(saved.get("env"), source)
    await start_engine(link, eq_tui, source, run_dir.path, list(extra), values)


async def start_for_command(target: RemoteTarget, verb: str, config_path: str | None) -> None:
    """A shell verb on HOST:RUN_DIR whose engine is not running there: start it on the host in
    the background, waiting for the verb's command (as detach.start_for_command does here)."""
    from eq_tui.cli.remote.link import open_link

    link = await open_link(target.host, config_path, read_from=str(target))
    try:
        located = await link.locate(target)
        await resume(link, located, config_path, ["--await-command", str(AWAIT_COMMAND_S)])
    finally:
        await link.close()
    print(f"eq-tui: no engine was running for {located}: started one on {target.host} in the "
          f"background for `eq-tui {verb}` (it exits when its queue is done)\n"
          f"  watch:  {command_line('attach', str(located), config_path)}", file=sys.stderr)


def how_to_reach(target: RemoteTarget, config_path: str | None) -> dict[str, str]:
    return {"watch": command_line("attach", str(target), config_path),
            "status": command_line("status", str(target), config_path),
            "stop": command_line("stop", str(target), config_path)}
