"""The shell the remote commands run on a host over SSH, kept as scripts beside this module
(eq_tui/cli/remote/scripts/*.sh, shipped in the wheel with the package); their arguments travel
as positional parameters ($1, $2, ...), shlex-quoted by SshRunner.run."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def remote_script(name: str) -> str:
    return (resources.files("eq_tui.cli.remote") / "scripts" / name).read_text(encoding="utf-8")
