"""The commands that help write a manifest and use the tool rather than run a queue:
`eq-tui schema`, `eq-tui init`, `eq-tui completion`. Each is imported only when used."""

from __future__ import annotations

import argparse

TOOL_COMMANDS = ("schema", "init", "completion")


def new_parser(command: str, description: str) -> argparse.ArgumentParser:
    from eq_tui.cli import _Parser  # usage errors: exit 2 with a message, like every command

    return _Parser(prog=f"eq-tui {command}", description=description,
                   formatter_class=argparse.RawDescriptionHelpFormatter)


def tool_parser(command: str) -> argparse.ArgumentParser:
    if command == "schema":
        return new_parser("schema", "Print the manifest's JSON Schema (draft 2020-12), for "
                                    "editors: a manifest whose first line is `# yaml-language-"
                                    "server: $schema=PATH` gets completion and checks.")
    if command == "init":
        from eq_tui.init_cmd import build_init_parser

        return build_init_parser()
    from eq_tui.completion import build_completion_parser

    return build_completion_parser()


def tool_command(command: str, rest: list[str]) -> int:
    options = tool_parser(command).parse_args(rest)
    if command == "schema":
        from eq_tui.manifest.json_schema import schema_text

        print(schema_text(), end="")
        return 0
    if command == "init":
        from eq_tui.init_cmd import init_command

        return init_command(options)
    from eq_tui.completion import completion_command

    return completion_command(options)
