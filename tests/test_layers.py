"""Layering rules that ARCHITECTURE promises."""

import subprocess
import sys


def test_engine_does_not_import_textual() -> None:
    code = ("import eq_tui.engine, eq_tui.engine.engine, eq_tui.headless, sys; "
            "assert 'textual' not in sys.modules, 'the engine imported textual'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_help_does_not_import_the_ui() -> None:
    code = ("import sys; from eq_tui.cli import build_parser; build_parser(); "
            "assert 'textual' not in sys.modules and 'asyncssh' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


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
