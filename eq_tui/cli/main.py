"""`eq-tui`: one table from each verb to the module that runs it, and the one place where an
expected failure becomes a message and an exit code (2 usage/manifest, 3 host/run dir, 130
interrupted), never a traceback. Anything that is not a verb is the main command: `eq-tui
MANIFEST...` (run.py), except a first word that is no file and no path either: a mistyped verb,
answered with the nearest (`eq-tui stats .`: did you mean `status`?)."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, cast

from eq_tui.cli.queue_verb_names import VERBS as QUEUE_VERBS
from eq_tui.errors import EqTuiError, UsageError


class _Parser(Protocol):
    def __call__(self, verb: str) -> argparse.ArgumentParser: ...


class _Runner(Protocol):
    def __call__(self, verb: str, argv: list[str]) -> int: ...


@dataclass(frozen=True)
class Verb:
    """Where a verb's parser (its options, for --help and completion) and its runner (parses its
    own arguments; the exit code) are: `module:function` in eq_tui.cli, imported when used, so
    `eq-tui --help` and each verb load only their own modules (the UI's client, the results'
    tables and the remote links cost a `--help` 150 ms when every verb was imported first)."""

    parser_at: str
    run_at: str

    def parser(self, verb: str) -> argparse.ArgumentParser:
        return cast(_Parser, _function(self.parser_at))(verb)

    def run(self, verb: str, argv: list[str]) -> int:
        return cast(_Runner, _function(self.run_at))(verb, argv)


def _function(where: str) -> object:
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(f"eq_tui.cli.{module}"), name)


def completion_run(verb: str, argv: list[str]) -> int:
    from eq_tui.cli import completion

    return completion.run(verb, argv, parsers())


def _verb(module: str) -> Verb:
    return Verb(f"{module}:parser", f"{module}:run")


VERBS: dict[str, Verb] = {
    "status": _verb("status"),
    "stop": _verb("stop"),
    "attach": _verb("attach"),
    "results": _verb("results"),
    "init": _verb("init"),
    "schema": _verb("schema"),
    "explain-log": _verb("explain_log"),
    "completion": Verb("completion:parser", "main:completion_run"),
    "notify-test": _verb("notify_test"),
    # acting on a running queue through its control socket: parsed in queue_verbs, sent in
    # queue_send
    **{verb: Verb("queue_verbs:parser", "queue_send:run") for verb in QUEUE_VERBS},
}
MAIN = _verb("run")  # eq-tui MANIFEST... (with --dry-run, --detach, --no-ui)


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser, "" for the main command."""
    return {"": MAIN.parser(""), **{name: verb.parser(name) for name, verb in VERBS.items()}}


def unknown_verb(word: str) -> UsageError | None:
    """The answer for a first word that is neither a verb nor a manifest: no such file, no
    path (no `/`), no manifest's extension, no option. None for one the main command takes."""
    if (word.startswith("-") or os.path.lexists(word) or "/" in word or "\0" in word
            or word.lower().endswith((".yaml", ".yml", ".json"))):
        return None
    near = difflib.get_close_matches(word, list(VERBS), n=1, cutoff=0.5)
    hint = f" — did you mean `{near[0]}`?" if near else " and no file of that name"
    return UsageError(f"unknown command {word!r}{hint} (`eq-tui --help` lists the commands)")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in VERBS:
            return VERBS[args[0]].run(args[0], args[1:])
        typo = unknown_verb(args[0]) if args else None
        if typo is not None:
            raise typo
        return MAIN.run("", args)
    except EqTuiError as exc:
        print(f"eq-tui: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("eq-tui: interrupted; jobs keep running in their sessions", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `eq-tui status RUN | head -1`: the reader left; no traceback, and none at exit when
        # Python flushes stdout again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
