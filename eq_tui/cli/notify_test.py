"""`eq-tui notify-test MANIFEST`: send one test message to every notify: target (exit 1 if one
fails)."""

from __future__ import annotations

import argparse
import asyncio

from eq_tui.cli.parsing import check_paths, new_parser
from eq_tui.errors import UsageError


def parser(verb: str = "notify-test") -> argparse.ArgumentParser:
    parser = new_parser(verb, "Send one test message to every notify: target of MANIFEST.")
    parser.add_argument("manifest", metavar="MANIFEST")
    return parser


def run(verb: str, argv: list[str]) -> int:
    options = parser(verb).parse_args(argv)
    check_paths([options.manifest])
    from eq_tui.manifest.loader import load_manifest
    from eq_tui.notify.notifier import send_test

    manifest = load_manifest(options.manifest)
    if not manifest.notify:
        raise UsageError(f"{options.manifest}: no 'notify:' targets to test")
    results = asyncio.run(send_test(manifest.notify, manifest.project))
    for label, error in results.items():
        print(f"{label}: {'ok' if error is None else 'FAILED: ' + error}")
    return 0 if all(error is None for error in results.values()) else 1
