"""README's "Try it without a GPU" works as written: its `init` line makes the twelve-job sweep
on two simulated GPUs, `--dry-run` passes preflight (fake-train found), the queue runs to the
end, and `eq-tui results` shows the four seeds of each learning rate. (The install, PATH and
`cd` lines are the reader's; the run is `--no-ui` with shorter epochs, the same jobs.)"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
README = (Path(__file__).resolve().parent.parent.parent / "README.md").read_text(encoding="utf-8")
EQ = [sys.executable, "-m", "eq_tui"]


def try_block() -> list[str]:
    """The section's command lines, comments cut."""
    section = README[README.index("## Try it without a GPU"):]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines()]


def eq_line(line: str) -> list[str]:
    words = shlex.split(line)
    assert words[0] == "eq-tui", line
    return [*EQ, *words[1:]]


def test_the_try_section_runs_as_written(tmp_path: Path) -> None:
    lines = try_block()
    assert README.index("## Try it without a GPU") < README.index("## Install")
    assert lines[0].startswith("python3 -m venv") and "pip install ." in lines[0]
    init, dry, ui, results = (next(line for line in lines if re.fullmatch(pattern, line))
                              for pattern in (r"eq-tui init .*", r"eq-tui eq-tui.yaml --dry-run",
                                              r"eq-tui eq-tui.yaml", r"eq-tui results .*"))
    assert ui == "eq-tui eq-tui.yaml" and "--hosts sim:2" in init and "fake-train" in init

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=240)

    made = run(eq_line(init))
    assert made.returncode == 0 and "12 job(s) on sim" in made.stdout, made.stderr
    planned = run(eq_line(dry))
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "ok   sim: command: `fake-train` found" in planned.stdout
    manifest = tmp_path / "eq-tui.yaml"
    manifest.write_text(manifest.read_text().replace("--epoch-seconds 2", "--epoch-seconds 0.1"))
    ran = run([*eq_line(ui), "--no-ui"])
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr
    assert "queue finished (exit 0): completed 12" in ran.stdout
    table = run(eq_line(results))
    assert table.returncode == 0, table.stderr
    rows = [line.split() for line in table.stdout.splitlines() if line.startswith("main")]
    assert [(row[1], row[2]) for row in rows] == [("0.1", "4/4"), ("0.03", "4/4"),
                                                  ("0.01", "4/4")]
    best = [row for row in rows if "*" in row]
    assert best and all(row[1] == "0.03" for row in best), table.stdout  # fake-train peaks there
