"""What preflight can check of a job's command before anything launches: its first word (must
resolve with `command -v` in the job's environment) and the script a known interpreter or
launcher runs (`python train.py`, `bash run.sh`, `torchrun ... train.py`: must exist relative
to the cwd). Pure: it reads command text, nothing else."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from eq_tui.hosts.base import CommandCheck
from eq_tui.manifest.model import JobSpec

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_OPERATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", "{", "}", "!"})
_SCRIPT = re.compile(r".+\.(py|sh|bash|zsh|pl|rb|R|r|jl|js|lua)$")
# first words that take a script as their first path-like argument
_RUNNERS = re.compile(r"(python[0-9.]*|pypy[0-9.]*|bash|sh|zsh|dash|perl|ruby|Rscript|julia|"
                      r"node|lua|torchrun|deepspeed|accelerate|horovodrun|mpirun|srun|nohup|"
                      r"time|uv|poetry|pipenv)$")
# a shell keyword or builtin first: the command is shell code we do not second-guess
_SHELL_CODE = frozenset({"cd", "if", "for", "while", "case", "export", "source", ".", "eval",
                         "exec", "set", "until", "function", "[", "test"})


def command_words(cmd: str) -> tuple[str, str | None] | None:
    """(first word, script path or None) for a command we can check, or None."""
    if any(mark in cmd for mark in ("`", "$(", "<<")):
        return None
    try:
        lexer = shlex.shlex(cmd, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return None
    simple: list[str] = []
    for word in words:
        if word in _OPERATORS or set(word) <= set("&|;()<>"):
            break
        simple.append(word)
    while simple and _ASSIGNMENT.match(simple[0]):
        simple.pop(0)
    if not simple or "$" in simple[0] or simple[0] in _SHELL_CODE or simple[0].startswith("-"):
        return None
    first = simple[0]
    return first, _script(simple) if _RUNNERS.match(first.rsplit("/", 1)[-1]) else None


def _script(words: list[str]) -> str | None:
    for word in words[1:]:
        if word in ("-m", "-c", "--module", "-e"):
            return None  # a module or inline code, not a file
        if "$" in word or word.startswith("-") or "=" in word:
            continue
        if _SCRIPT.fullmatch(word):
            return word
    return None


def command_checks(jobs: Iterable[JobSpec]) -> list[CommandCheck]:
    """One check per distinct (first word, script), naming every job that uses it."""
    groups: dict[tuple[str, str | None], list[str]] = {}
    for spec in jobs:
        found = command_words(spec.cmd)
        if found is not None:
            groups.setdefault(found, []).append(spec.id)
    return [CommandCheck(key=str(n), word=word, script=script, jobs=tuple(ids))
            for n, ((word, script), ids) in enumerate(groups.items())]
