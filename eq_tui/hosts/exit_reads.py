"""A finished attempt's metric files, read by the probe that sees its exit (probe.sh's
`exit_files` section) instead of by a command of their own: how the request names them, and
how the answer is read back."""

from __future__ import annotations

import re

from eq_tui.errors import HostError

IN_ATTEMPT_DIR = "%/"  # a path in the attempt dir, sent short (every probe carries them)
_FIELD_UNSAFE = re.compile(r"[\t\n\r]")


def exit_read_fields(attempt_dir: str, paths: tuple[str, ...]) -> list[str]:
    """The paths as probe.sh's `A` line takes them: tab-separated fields, those in the
    attempt dir as `%/NAME`; a path of the job's own that begins with `%` keeps its meaning
    as `./%...`."""
    prefix = attempt_dir.rstrip("/") + "/"
    fields = []
    for path in paths:
        if _FIELD_UNSAFE.search(path):
            raise HostError(f"metrics path {path!r} contains a tab or newline")
        if path.startswith(prefix) and "/" not in path[len(prefix):]:
            fields.append(IN_ATTEMPT_DIR + path[len(prefix):])
        elif path.startswith("%"):
            fields.append("./" + path)
        else:
            fields.append(path)
    return fields


def parse_exit_files(lines: list[str], boundary: str,
                     asked: dict[str, int]) -> dict[str, tuple[str | None, ...]]:
    """The `exit_files` section: per attempt key, the text of each file asked for (`asked`:
    how many), None where it was not there. A key the request did not ask for is dropped;
    a file index out of range too."""
    attempt_mark, file_mark = boundary + ".r ", boundary + ".f "
    found: dict[str, list[str | None]] = {}
    current: list[str | None] | None = None
    index: int | None = None
    body: list[str] = []

    def close() -> None:
        if current is not None and index is not None and 0 <= index < len(current):
            current[index] = "\n".join(body)

    for line in lines:
        if line.startswith(attempt_mark):
            close()
            key = line[len(attempt_mark):]
            current = found.setdefault(key, [None] * asked[key]) if key in asked else None
            index, body = None, []
        elif line.startswith(file_mark):
            close()
            fields = line[len(file_mark):].split()
            index = int(fields[0]) if fields and fields[0].isdigit() else None
            body = []
        elif index is not None:
            body.append(line)
    close()
    return {key: tuple(texts) for key, texts in found.items()}
