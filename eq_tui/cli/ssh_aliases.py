"""The host aliases an ssh config names (`Host box1 box2`, through `Include`), for `eq-tui
init` to offer and shell completion to complete. Patterns (`*`, `?`, `!`) are not aliases."""

from __future__ import annotations

import glob
import os
from pathlib import Path

_MAX_DEPTH = 8  # Include loops


def ssh_aliases(config: str | os.PathLike[str] | None = None) -> list[str]:
    path = Path(config) if config is not None else Path.home() / ".ssh" / "config"
    aliases: list[str] = []
    _read(path, aliases, 0)
    return list(dict.fromkeys(aliases))


def _read(path: Path, aliases: list[str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return
    for line in lines:
        words = line.strip().replace("=", " ", 1).split()
        if not words or words[0].startswith("#"):
            continue
        keyword, values = words[0].lower(), words[1:]
        if keyword == "host":
            aliases.extend(v for v in values if not any(c in v for c in "*?!"))
        elif keyword == "include":
            for pattern in values:
                expanded = os.path.expanduser(pattern)
                if not os.path.isabs(expanded):
                    expanded = str(Path.home() / ".ssh" / expanded)
                for included in sorted(glob.glob(expanded)):
                    _read(Path(included), aliases, depth + 1)
