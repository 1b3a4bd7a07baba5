"""`eq-tui`: one table from each verb to the module that runs it, and the one place where an
expected failure becomes a message and an exit code (2 usage/manifest, 3 host/run dir, 130
interrupted), never a traceback. Anything that is not a verb is the main command: `eq-tui
MANIFEST...` (run.py)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eq_tui.cli import (
    attach,
    completion,
    init,
    notify_test,
    queue_send,
    queue_verbs,
    results,
    run,
    schema,
    status,
    stop,
)
from eq_tui.errors import EqTuiError


@dataclass(frozen=True)
class Verb:
    parser: Callable[[str], argparse.ArgumentParser]  # its options, for --help and completion
    run: Callable[[str, list[str]], int]  # parses its own arguments; the exit code


def _completion(verb: str, argv: list[str]) -> int:
    return completion.run(verb, argv, parsers())


VERBS: dict[str, Verb] = {
    "status": Verb(status.parser, status.run),
    "stop": Verb(stop.parser, stop.run),
    "attach": Verb(attach.parser, attach.run),
    "results": Verb(results.parser, results.run),
    "init": Verb(init.parser, init.run),
    "schema": Verb(schema.parser, schema.run),
    "completion": Verb(completion.parser, _completion),
    "notify-test": Verb(notify_test.parser, notify_test.run),
    # acting on a running queue through its control socket: parsed in queue_verbs, sent in
    # queue_send
    **{verb: Verb(queue_verbs.parser, queue_send.run) for verb in queue_verbs.VERBS},
}
MAIN = Verb(run.parser, run.run)  # eq-tui MANIFEST... (with --dry-run, --detach, --no-ui)


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser, "" for the main command."""
    return {"": MAIN.parser(""), **{name: verb.parser(name) for name, verb in VERBS.items()}}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in VERBS:
            return VERBS[args[0]].run(args[0], args[1:])
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
