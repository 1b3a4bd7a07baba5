"""`did you mean`: the names a host's PATH offers that are closest to a command word that does
not resolve there (preflight.sh lists the executables about as long). Pure."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CUTOFF = 0.75  # difflib's similarity: `fake-trian`/`fake-train` 0.9, `pythn3`/`python3` 0.92
MOST = 3


def closest(word: str, names: Iterable[str]) -> list[str]:
    """Up to MOST names like `word`, the closest first."""
    return difflib.get_close_matches(word, sorted(set(names) - {word}), n=MOST, cutoff=CUTOFF)


def did_you_mean(word: str, names: Iterable[str]) -> str:
    """`; did you mean `fake-train`?` (or `a` or `b`), or nothing."""
    found = closest(word, names)
    if not found:
        return ""
    return "; did you mean " + " or ".join(f"`{name}`" for name in found) + "?"
