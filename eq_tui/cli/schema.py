"""`eq-tui schema`: print the manifest's JSON Schema, for editors."""

from __future__ import annotations

import argparse

from eq_tui.cli.parsing import new_parser


def parser(verb: str = "schema") -> argparse.ArgumentParser:
    return new_parser(verb, "Print the manifest's JSON Schema (draft 2020-12), for editors: a "
                            "manifest whose first line is `# yaml-language-server: "
                            "$schema=PATH` gets completion and checks.")


def run(verb: str, argv: list[str]) -> int:
    parser(verb).parse_args(argv)
    from eq_tui.manifest.json_schema import schema_text

    print(schema_text(), end="")
    return 0
