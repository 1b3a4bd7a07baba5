"""`tests/` folders and the `integration` marker agree (docs/testing.md, "Where the tests
are"): every test under tests/integration/ carries the marker (its conftest.py gives it to
all of them), and a module under tests/unit/ neither carries it nor starts what it stands
for — a real screen/tmux session, sshd, Slurm, or an engine on a simulated or local host."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
# what builds real sessions or daemons for a test: the sshd/Slurm beds, eq-tui on them, a tmux
# server, and the engine helpers that run jobs in screen/tmux on simulated or local hosts
REAL_PARTS = {
    "modules": {"tests.support.sshbed", "tests.support.slurmbed", "tests.support.remote_eq",
                "tests.support.tmux_attach"},
    "names": {"sim_hosts", "make_local_host", "run_to_end", "SshBed", "SlurmBed"},
    "fixtures": {"bed", "bed_work"},
}
# unit modules allowed to hold integration tests, each with why
UNIT_MODULES_WITH_INTEGRATION_TESTS = {
    # bench/mutation.py scores eq_tui/hosts/nvml.py with this file (its two tests on a real
    # local host kill mutants); they move to tests/integration when that bench is next edited
    "tests/unit/test_nvml.py",
}


def _uses(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module in REAL_PARTS["modules"]:
                found.append(f"imports {module}")
            found += [f"imports {a.name}" for a in node.names if a.name in REAL_PARTS["names"]]
        elif isinstance(node, ast.Import):
            found += [f"imports {a.name}" for a in node.names
                      if a.name in REAL_PARTS["modules"]]
        elif isinstance(node, ast.Attribute) and node.attr == "integration" \
                and ast.unparse(node.value) == "pytest.mark":
            found.append("carries the integration marker")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) \
                and node.name.startswith("test"):
            found += [f"{node.name} takes the {a.arg} fixture" for a in node.args.args
                      if a.arg in REAL_PARTS["fixtures"]]
    return found


def offenders(folder: Path) -> dict[str, list[str]]:
    found = {}
    for path in sorted(folder.rglob("*.py")):
        where = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
        uses = _uses(ast.parse(path.read_text()))
        if uses and where not in UNIT_MODULES_WITH_INTEGRATION_TESTS:
            found[where] = uses
    return found


def test_no_unit_module_is_an_integration_test() -> None:
    assert offenders(TESTS / "unit") == {}


def test_the_rule_sees_a_unit_module_that_runs_real_sessions(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "import pytest\nfrom tests.support.engine_run import run_to_end\n"
        "pytestmark = pytest.mark.integration\n"
        "def test_on_the_bed(bed): ...\n")
    assert [sorted(uses) for uses in offenders(tmp_path).values()] == [[
        "carries the integration marker", "imports run_to_end",
        "test_on_the_bed takes the bed fixture"]]


def test_every_test_under_integration_carries_the_marker() -> None:
    """Collected, as pytest sees them: none under tests/integration is left out by
    `-m "not integration"`."""
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0",
         "-p", "no:cacheprovider", "--assert=plain",  # collecting needs no rewritten asserts
         "-m", "not integration", str(TESTS / "integration")],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert collected.returncode == 5, collected.stdout[-3000:] + collected.stderr[-3000:]
    assert "no tests collected" in collected.stdout
