"""`python3` on the tests' PATH as the interpreter itself, not a version manager's shim.

Jobs and simulated GPUs on local hosts run `python3` from PATH (fake-train's
`#!/usr/bin/env python3`, the simulated nvidia-smi's slow path). Where PATH finds a pyenv shim
first, as on the CI machines, every such start ran a bash script and a dozen helper processes
(pyenv-exec, -which, -hooks, -version-file...) before Python: 0.12 s of CPU each, some 1,600
times a run, about a tenth of the suite's CPU on two cores. The shim only picks an interpreter
and execs it, so the session asks it once which one and puts a link to that first on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

MARKER = "EQ_TEST_DIRECT_PYTHON"  # set once the link is on PATH (the xdist workers inherit it)
NAMES = ("python3", "python")


def _interpreter_behind(command: str) -> str | None:
    """The interpreter `command` (found on PATH) ends up running, or None."""
    try:
        done = subprocess.run([command, "-c", "import sys; print(sys.executable)"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = done.stdout.strip()
    return found if done.returncode == 0 and found and os.path.isfile(found) else None


def put_interpreters_first() -> Path | None:
    """Link each of NAMES that PATH finds as a wrapper to the interpreter it runs, in a new
    folder put first on PATH. Returns the folder (the caller removes it at the end), or None
    when there is nothing to do."""
    if os.environ.get(MARKER):
        return None
    links: dict[str, str] = {}
    for name in NAMES:
        command = shutil.which(name)
        if command is None:
            continue
        real = _interpreter_behind(command)
        if real is not None and os.path.realpath(real) != os.path.realpath(command):
            links[name] = real
    if not links:
        return None
    folder = Path(tempfile.mkdtemp(prefix="eq-tui-python-"))
    folder.chmod(0o755)  # the test beds' login user runs jobs too
    for name, real in links.items():
        (folder / name).symlink_to(real)
    os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ[MARKER] = str(folder)
    return folder
