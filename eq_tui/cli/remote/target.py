"""`HOST:RUN_DIR` on the command line: a run dir on an SSH host, told apart from a local path."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from eq_tui.errors import UsageError
from eq_tui.manifest.ssh_target import TARGET_PATTERN, parse_ssh_target

# an ssh target (alias or [user@]host[:port]), then :RUN_DIR
_REMOTE = re.compile(rf"(?P<target>{TARGET_PATTERN}):(?P<run_dir>.+)", re.S)


@dataclass(frozen=True)
class RemoteTarget:
    host: str      # as given: alias, host, user@host or user@host:port
    run_dir: str   # a path on that host (absolute, ~/..., or relative to the login directory)

    def __str__(self) -> str:
        return f"{self.host}:{self.run_dir}"


def parse_target(text: str) -> RemoteTarget | None:
    """The remote target `text` names, or None for a local path. A path that exists locally is
    always local; so is anything whose part before the first colon holds a slash (`./a:b`)."""
    if "\0" in text or Path(text).exists():
        return None
    match = _REMOTE.fullmatch(text)
    if match is None:
        return None
    # greedy: user@host:2222:/runs/x is host user@host:2222; box:7 is host box, run dir 7
    return RemoteTarget(match["target"], match["run_dir"])


def check_host(host: str) -> str:
    """A `--on HOST` value, or a usage error that shows the accepted forms."""
    if parse_ssh_target(host) is None:
        raise UsageError(f"--on {host!r}: give an ssh alias, host, user@host or "
                         "user@host:port")
    return host


def command_line(verb: str, where: str, config_path: str | None = None, tail: str = "") -> str:
    """`eq-tui VERB WHERE [TAIL]` as a user can paste it (`tail`: shell text, quoted already),
    with the ssh config it was reached with."""
    line = f"eq-tui {verb} {shlex.quote(where)}" + (f" {tail}" if tail else "")
    return line + (f" --ssh-config {shlex.quote(config_path)}" if config_path else "")
