"""The one argument parser of every command, and the options several commands share: a usage
error is a message and exit 2 (never argparse's own exit), `[HOST:]RUN_DIR`, `--ssh-config`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from eq_tui.errors import UsageError

RUN_DIR_HELP = ("a run dir here (or the manifest that ran it, or that manifest's folder if it "
                "holds one run), or HOST:RUN_DIR on an ssh host (an existing local path wins)")


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # main() prefixes "eq-tui: "; a subcommand adds its own name once
        command = self.prog.removeprefix("eq-tui").strip()
        where = f"{command}: " if command else ""
        raise UsageError(f"{where}{message}\n(see `{self.prog} --help`)")


def new_parser(command: str, description: str, *, epilog: str | None = None,
               usage: str | None = None) -> Parser:
    """The parser of `eq-tui COMMAND` ("" for the main command), its text kept as written."""
    return Parser(prog=f"eq-tui {command}".rstrip(), description=description, epilog=epilog,
                  usage=usage, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_run_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="[HOST:]RUN_DIR", help=RUN_DIR_HELP)


def add_ssh_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ssh-config", metavar="PATH",
                        help="ssh config file to use instead of ~/.ssh/config")


def ssh_config_path(value: str | None) -> str | None:
    """--ssh-config's file, checked and made absolute (None: ~/.ssh/config)."""
    if value is None:
        return None
    check_paths([value])
    if not Path(value).is_file():
        raise UsageError(f"--ssh-config {value}: no such file")
    return str(Path(value).resolve())


def check_paths(values: Sequence[str | None]) -> None:
    for value in values:
        if value is not None and "\0" in value:
            raise UsageError(f"{value!r}: a path cannot contain a NUL byte")
