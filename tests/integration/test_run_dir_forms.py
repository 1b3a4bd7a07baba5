"""RUN_DIR on the command line: a run dir, the manifest that ran it, or the manifest's folder
when it holds one run, read the same way by every command, with one set of messages for what
names no run. A real run on a simulated GPU, the real entry point."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
EQ = [sys.executable, "-m", "eq_tui"]
MANIFEST = """\
project: forms
hosts: [{name: sim, simulate: {gpus: 1}}]
poll: 0.3
jobs:
  - {id: a, cmd: "fake-train --epochs 2 --epoch-seconds 0.1 --mem 1000 --seed 1"}
"""
VERBS = (["status"], ["results"], ["stop"], ["attach"], ["kill", "--", "a"],
         ["retry", "--", "a"])


def eq(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EQ, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def verb_args(verb: list[str], where: str) -> list[str]:
    """`eq-tui VERB WHERE [JOB]` (a `--` in `verb` marks where WHERE goes)."""
    if "--" in verb:
        cut = verb.index("--")
        return [*verb[:cut], where, *verb[cut + 1:]]
    return [*verb, where]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a manifest that has run to the end (its run dir beside it)."""
    folder = tmp_path_factory.mktemp("forms")
    (folder / "sweep.yaml").write_text(MANIFEST)
    done = eq("sweep.yaml", "--no-ui", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (folder / "experiment_queue" / "forms" / "queue_state.json").exists()
    return folder


@pytest.mark.parametrize("verb", [["status"], ["status", "--jobs"], ["results"]])
def test_the_manifest_and_its_folder_read_as_its_run_dir(ran: Path, verb: list[str]) -> None:
    by_dir = eq(*verb, "experiment_queue/forms", cwd=ran)
    assert by_dir.returncode == 0, by_dir.stderr
    for where in ("sweep.yaml", ".", str(ran / "sweep.yaml"), str(ran)):
        other = eq(*verb, where, cwd=ran)
        assert (other.returncode, other.stdout, other.stderr) == (0, by_dir.stdout, ""), where
    # from somewhere else, by the manifest's path
    elsewhere = eq(*verb, str(ran / "sweep.yaml"), cwd=ran.parent)
    assert (elsewhere.returncode, elsewhere.stdout) == (0, by_dir.stdout)


def one_message(where: str, cwd: Path) -> tuple[int, str]:
    """What every command that takes RUN_DIR says of `where`: the same code and message."""
    answers = {tuple(verb): eq(*verb_args(verb, where), cwd=cwd) for verb in VERBS}
    said = {(a.returncode, a.stderr) for a in answers.values()}
    assert len(said) == 1, answers
    code, err = said.pop()
    assert all(a.stdout == "" for a in answers.values()), answers
    assert "Traceback" not in err
    return code, err


def test_one_set_of_messages_for_what_names_no_run(ran: Path, tmp_path: Path) -> None:
    code, err = one_message(str(tmp_path / "nowhere"), tmp_path)
    assert (code, err) == (3, f"eq-tui: {tmp_path / 'nowhere'}: no such file or directory "
                              "(give a run dir, the manifest that ran it, or that manifest's "
                              "folder)\n")
    code, err = one_message(".", tmp_path)
    assert code == 3 and err.startswith("eq-tui: .: no eq-tui run here")
    (tmp_path / "new.yaml").write_text(MANIFEST.replace("forms", "fresh"))
    code, err = one_message("new.yaml", tmp_path)
    assert (code, err) == (3, "eq-tui: new.yaml has not run yet (no run dir "
                              "experiment_queue/fresh); `eq-tui new.yaml` runs it (a run "
                              "elsewhere, made with --run-dir: give that dir)\n")
    (tmp_path / "notes.txt").write_text("- just: [a list\n")
    code, err = one_message("notes.txt", tmp_path)
    assert code == 2 and err.startswith("eq-tui: notes.txt is not a run dir, and not a "
                                        "manifest eq-tui can read: notes.txt:")
    # a folder of two runs (an archived one does not count) names them
    folder = tmp_path / "two"
    shutil.copytree(ran / "experiment_queue", folder / "experiment_queue")
    shutil.copytree(folder / "experiment_queue" / "forms",
                    folder / "experiment_queue" / "forms.20260101-101010")
    assert eq("status", str(folder), cwd=tmp_path).returncode == 0
    shutil.copytree(folder / "experiment_queue" / "forms", folder / "experiment_queue" / "b")
    code, err = one_message("two", tmp_path)
    assert (code, err) == (3, "eq-tui: two holds 2 runs; name one of them:\n"
                              "  two/experiment_queue/b\n  two/experiment_queue/forms\n")
