"""Changing one `--key value` of a command's text (edit --set, clone --set), the way the
manifest renders args: `true` is the bare flag, `false` drops it, anything else is the flag and
the value, quoted. The rest of the text is left as it was written. `--set` changes a flag the
command has (unknown_flag says why not); `--add-flag` adds one on purpose."""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Mapping

from eq_tui.manifest.expand import valid_arg_key

# one shell word: bare characters, escapes, single- or double-quoted runs
_WORD = re.compile(r"""(?:[^\s'"\\]|\\.|'[^']*'|"(?:[^"\\]|\\.)*")+""", re.S)
_OPERATORS = re.compile(r"(?:\d*[<>]|[|&;]).*")  # where the command's own words end
_NUMBER = re.compile(r"-\d[\d.e+-]*")


class ArgError(ValueError):
    pass


def parse_sets(items: list[str], option: str = "--set") -> dict[str, str]:
    """`key=value` items (from the command line) as a mapping; a bare `key` means `true`."""
    sets: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.removeprefix("--")
        if not valid_arg_key(key):
            raise ArgError(f"{option} {item!r}: the name may only use letters, digits, '_', "
                           "'.', '-' (write it without the leading --)")
        sets[key] = value if sep else "true"
    return sets


def _render(key: str, value: str) -> str:
    if value == "false":
        return ""
    if value == "true":
        return f"--{key}"
    return f"--{key} {shlex.quote(value)}"


def flags(cmd: str) -> list[str]:
    """The `--key` names of the command's own words (before any `|`, `;`, `>`, ...), in order,
    each once."""
    names: list[str] = []
    for word in _WORD.finditer(cmd):
        text = word.group()
        if _OPERATORS.fullmatch(text):
            break
        name = text.removeprefix("--").partition("=")[0]
        if text.startswith("--") and valid_arg_key(name) and name not in names:
            names.append(name)
    return names


def unknown_flag(cmd: str, sets: Mapping[str, str]) -> str | None:
    """Why `sets` cannot change `cmd`: the first key that is no flag of it (a typo would add a
    flag the script does not take, and cost a run), with the flags it has, the nearest, and the
    way to add one on purpose. None when every key is a flag of it."""
    have = flags(cmd)
    for key, value in sets.items():
        if key in have:
            continue
        near = difflib.get_close_matches(key, have, n=1)
        hint = f"; did you mean --{near[0]}?" if near else ""
        listed = ", ".join(f"--{name}" for name in have) or "none"
        return (f"the command has no --{key} (its flags: {listed}){hint} "
                f"(--add-flag {shlex.quote(f'{key}={value}')} adds it as a new flag)")
    return None


def set_arg(cmd: str, key: str, value: str) -> str:
    if not valid_arg_key(key):
        raise ArgError(f"argument name {key!r} may only use letters, digits, '_', '.', '-'")
    words = list(_WORD.finditer(cmd))
    end_of_command = next((w.start() for w in words if _OPERATORS.fullmatch(w.group())),
                          len(cmd.rstrip()))
    flag = f"--{key}"
    new = _render(key, value)
    for i, word in enumerate(words):
        if word.start() >= end_of_command:
            break
        text = word.group()
        if text == flag or text.startswith(flag + "="):
            stop = word.end()
            if text == flag:
                for value_word in words[i + 1:]:
                    v = value_word.group()
                    if value_word.start() >= end_of_command or \
                            (v.startswith("-") and not _NUMBER.fullmatch(v)):
                        break
                    stop = value_word.end()
            head, tail = cmd[:word.start()].rstrip(), cmd[stop:].lstrip()
            return " ".join(part for part in (head, new, tail) if part)
    if not new:
        return cmd
    head, tail = cmd[:end_of_command].rstrip(), cmd[end_of_command:].lstrip()
    return " ".join(part for part in (head, new, tail) if part)


def apply_sets(cmd: str, sets: Mapping[str, str]) -> str:
    for key, value in sets.items():
        cmd = set_arg(cmd, key, value)
    return cmd
