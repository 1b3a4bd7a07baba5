"""`eq-tui results [HOST:]RUN_DIR`: the results table of a running or finished run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from eq_tui.cli.parsing import add_run_dir, add_ssh_config, new_parser, ssh_config_path
from eq_tui.errors import RunDirError, UsageError
from eq_tui.results.group import MixedConfigurations, group
from eq_tui.results.records import RESULTS_FILE, Record, loads, read_records
from eq_tui.results.render import FORMATS, render
from eq_tui.results.settings import ResultSettings, from_manifest_json, read_settings
from eq_tui.results.unseen import Watched, read_watched, unseen_in_records, watched_from_json

DESCRIPTION = """\
The results table of a run (running or finished), from its results.jsonl: one row per
configuration (its grid parameters minus the seed-like key), n of expected, mean ± std, min and
max of each metric over the seeds, the missing or failed seeds named, duplicate seeds flagged,
the best row of each phase per metric marked by the manifest's `goal`. A row whose jobs ran
different commands (one edited, a clone with --set, a manifest changed after some completed)
says `commands differ` and is never marked best. A goal or early_stop metric never read from
completed jobs is said below the table (json: `metrics_never_read`; csv and latex: on stderr),
with the jobs and the metrics read instead. A run with a search (its optuna.journal): each
study's best trial and its parameters, the trials' values in the order told with the best so
far (a text plot), and which parameters mattered, below the table (json: `searches`, the values
under `curve`; no Optuna installed here: how to install it)."""


def parser(verb: str = "results") -> argparse.ArgumentParser:
    parser = new_parser(verb, DESCRIPTION)
    add_run_dir(parser)
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="table (default), csv, json, markdown or latex")
    parser.add_argument("--metric", action="append", metavar="NAME",
                        help="a metric to show (repeat for more; default: those with a goal, "
                             "else the first few found)")
    parser.add_argument("--group-over", metavar="KEY",
                        help="the grid key averaged over (default: the manifest's group_over, "
                             "else seed)")
    parser.add_argument("--by", metavar="KEY,...",
                        help="group by these grid keys only; refused when the jobs of a row "
                             "would differ in another key")
    add_ssh_config(parser)
    return parser


def table_text(records: list[Record], settings: ResultSettings, options: argparse.Namespace,
               watched: Sequence[Watched] = ()) -> str:
    by = [key.strip() for key in options.by.split(",") if key.strip()] if options.by else None
    try:
        table = group(records, group_over=options.group_over or settings.group_over,
                      goals=settings.goals, metrics=options.metric, by=by)
    except MixedConfigurations as exc:
        raise UsageError(str(exc)) from None
    unseen = unseen_in_records(watched, records)
    if unseen and options.format in ("csv", "latex"):
        sys.stderr.writelines(f"{finding.text()}\n" for finding in unseen)
    return render(table, options.format, unseen)


Read = tuple[list[Record], ResultSettings, list[Watched]]


def _local(run_dir: Path) -> Read:
    records = read_records(run_dir, series=False)
    if records is None:
        raise RunDirError(f"{run_dir}: no {RESULTS_FILE} yet (the engine writes it as jobs "
                          "finish)")
    return records, read_settings(run_dir), read_watched(run_dir)


def _remote(spec: str, config_path: str | None) -> Read:
    import asyncio
    import json
    import posixpath

    from eq_tui.cli.remote.link import open_link
    from eq_tui.cli.remote.shell import remote_script
    from eq_tui.cli.remote.target import parse_target

    target = parse_target(spec)
    assert target is not None

    async def fetch() -> tuple[str | None, str | None]:
        link = await open_link(target.host, config_path, read_from=str(target))
        try:
            located = await link.locate(target)
            texts: list[str | None] = []
            for name in (RESULTS_FILE, "manifest.json"):
                result = await link.run(remote_script("read_file.sh"),
                                        [posixpath.join(located.path, name)], timeout=120)
                texts.append(result.stdout.decode(errors="replace")
                             if result.returncode == 0 else None)
            return texts[0], texts[1]
        finally:
            await link.close()

    text, manifest = asyncio.run(fetch())
    if text is None:
        raise RunDirError(f"{spec}: no {RESULTS_FILE} yet (the engine writes it as jobs finish)")
    try:
        data = json.loads(manifest) if manifest else None
    except ValueError:
        data = None
    settings = from_manifest_json(data) if data is not None else ResultSettings()
    return loads(text, series=False), settings, watched_from_json(data)


def run(verb: str, argv: Sequence[str]) -> int:
    options = parser(verb).parse_args(list(argv))
    from eq_tui.cli.remote.target import parse_target

    if parse_target(options.run_dir) is not None:
        records, settings, watched = _remote(options.run_dir,
                                             ssh_config_path(options.ssh_config))
    else:
        from eq_tui.cli.run_dirs import resolve

        run_dir = resolve(options.run_dir)
        records, settings, watched = _local(run_dir)
        text = table_text(records, settings, options, watched)
        sys.stdout.write(with_searches(text, run_dir, options.format))
        return 0
    sys.stdout.write(table_text(records, settings, options, watched))
    return 0


def with_searches(text: str, run_dir: Path, fmt: str) -> str:
    """The run's searches (best trial, curve, importance) below a table or markdown, under
    json's `searches` (none: the output of a run without one; a journal and no Optuna: how to
    install it, json's `searches_unread`); csv and latex stay one table."""
    import json

    from eq_tui.runfiles.search_summary import optuna_missing, read_searches

    if fmt not in ("table", "markdown", "json"):
        return text
    missing = optuna_missing(run_dir)
    if missing and fmt != "json":
        return text + "\n" + missing + "\n"
    searches = read_searches(run_dir)
    if not searches and not missing:
        return text
    if fmt == "json":
        data = json.loads(text)
        data["searches"] = [study.to_json() for study in searches]
        if missing:
            data["searches_unread"] = missing
        return json.dumps(data, indent=2) + "\n"
    return text + "".join("\n" + study.text() for study in searches)
