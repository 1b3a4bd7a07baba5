"""An ssh target as eq-tui accepts it everywhere (manifest `ssh:`, `--on HOST`, `HOST:RUN_DIR`):
an alias from the ssh config, or [user@]host[:port]."""

from __future__ import annotations

import re
from dataclasses import dataclass

# No '/' in either part: `./a:b` and `runs/x:y` are local paths, never a host (see
# cli/remote/target.py); no ':' in the user: a Unix user name cannot hold one.
TARGET_PATTERN = r"(?:(?P<user>[^@\s:/]+)@)?(?P<host>[^@\s:/]+)(?::(?P<port>\d+))?"
FORMS = "an ssh alias or [user@]host[:port]"
_TARGET = re.compile(TARGET_PATTERN)


@dataclass(frozen=True)
class SshTarget:
    host: str              # the host name, address or ssh config alias
    user: str | None = None
    port: int | None = None

    @property
    def login(self) -> str:
        """`user@host` or `host`: what OpenSSH takes as its destination (the port apart)."""
        return f"{self.user}@{self.host}" if self.user else self.host


def parse_ssh_target(text: str) -> SshTarget | None:
    """The target `text` names, or None when it is not one of the accepted forms."""
    match = _TARGET.fullmatch(text)
    if match is None:
        return None
    return SshTarget(host=match["host"], user=match["user"],
                     port=int(match["port"]) if match["port"] else None)
