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
