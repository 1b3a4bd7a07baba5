"""Layering rules that ARCHITECTURE promises: cli -> front ends -> engine -> hosts -> manifest ->
sim, errors (the import contract in pyproject.toml), checked both statically (lint-imports) and
by what an import really loads."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def loaded_after(imports: str) -> set[str]:
    """The eq_tui packages and the UI/ssh libraries a fresh interpreter holds after `imports`."""
    code = (f"import sys; {imports}; print('\\n'.join(m for m in sys.modules "
            "if m.startswith(('eq_tui.', 'textual', 'asyncssh'))))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    return set(out.split())


def packages(modules: set[str]) -> set[str]:
    return {m if not m.startswith("eq_tui.") else ".".join(m.split(".")[:2]) for m in modules}


def test_engine_does_not_import_textual() -> None:
    code = ("import eq_tui.engine, eq_tui.engine.engine, eq_tui.headless, sys; "
            "assert 'textual' not in sys.modules, 'the engine imported textual'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_help_does_not_import_the_ui() -> None:
    code = ("import sys; from eq_tui.cli import build_parser; build_parser(); "
            "assert 'textual' not in sys.modules and 'asyncssh' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_manifest_stands_on_its_own() -> None:
    loaded = packages(loaded_after("import eq_tui.manifest, eq_tui.manifest.loader, "
                                   "eq_tui.manifest.ssh_target, eq_tui.manifest.ids"))
    assert "eq_tui.manifest" in loaded
    assert not loaded & {"eq_tui.engine", "eq_tui.hosts", "textual", "asyncssh"}, loaded


def test_hosts_do_not_import_the_engine() -> None:
    loaded = packages(loaded_after(
        "import eq_tui.hosts.factory, eq_tui.hosts.shell_host, eq_tui.hosts.slurm, "
        "eq_tui.hosts.ssh, eq_tui.hosts.local, eq_tui.hosts.watch"))
    assert {"eq_tui.hosts", "eq_tui.manifest", "asyncssh"} <= loaded
    assert not loaded & {"eq_tui.engine", "textual"}, loaded


@pytest.mark.parametrize("front_end", [
    "eq_tui.status", "eq_tui.remote.target", "eq_tui.remote.link", "eq_tui.remote.start",
    "eq_tui.remote.status", "eq_tui.remote.on_host", "eq_tui.detach", "eq_tui.plan"])
def test_front_ends_without_a_screen_do_not_import_textual(front_end: str) -> None:
    loaded = packages(loaded_after(f"import {front_end}"))
    assert "textual" not in loaded, loaded


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint is not None, "lint-imports is missing: .ci/setup installs it (dev extra)"
    return subprocess.run([lint, "--no-cache", "--config", str(cwd / "pyproject.toml")],
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(cwd)},
                          capture_output=True, text=True)


def test_the_import_contract_holds_and_catches_a_reversed_import(tmp_path: Path) -> None:
    kept = lint_imports(ROOT)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    shutil.copytree(ROOT / "eq_tui", tmp_path / "eq_tui",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    base = tmp_path / "eq_tui" / "hosts" / "base.py"
    base.write_text(base.read_text() + "\nimport eq_tui.engine  # reversed: hosts -> engine\n")
    broken = lint_imports(tmp_path)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "eq_tui.hosts is not allowed to import eq_tui.engine" in broken.stdout
    assert "eq_tui.hosts.base -> eq_tui.engine" in broken.stdout
def test_nothing_in_the_ui_imports_the_app_back() -> None:
    """The app imports its widgets and helpers; none of them imports the app (no cycle: the
    palette's commands come from EqTuiApp.get_system_commands). Only launch.py, which runs
    the app, may."""
    import ast
    from pathlib import Path

    tui = Path(__file__).resolve().parent.parent / "eq_tui" / "tui"
    offenders = []
    for path in tui.rglob("*.py"):
        if path.parent == tui and path.name in ("app.py", "launch.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if "eq_tui.tui.app" in names:
                offenders.append(str(path.relative_to(tui)))
    assert offenders == [], f"these import eq_tui.tui.app: {offenders}"


def test_a_jobs_spec_is_read_from_the_ledger_only() -> None:
    """The ledger's specs are the one source of a job's spec: the manifest's `job_specs` are
    the file as it was at start, and know nothing of clones, adds, reloads and edits."""
    readers = [f"{path.relative_to(ROOT)}:{n}"
               for path in sorted((ROOT / "eq_tui").rglob("*.py"))
               if path.parent.name != "manifest" and path.name != "ledger.py"
               for n, line in enumerate(path.read_text().splitlines(), 1)
               if "manifest.job_specs.get(" in line or "manifest.job_specs[" in line]
    assert readers == []
