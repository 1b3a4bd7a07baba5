"""`eq-tui status [HOST:]RUN_DIR`: counts by status and the jobs that need a person; `--jobs`
a line a job (the report itself is status_report.py)."""

from __future__ import annotations

import argparse

from eq_tui.cli.parsing import add_run_dir, add_ssh_config, new_parser, ssh_config_path


def parser(verb: str = "status") -> argparse.ArgumentParser:
    parser = new_parser(verb, "Counts by status and the jobs that need a person.")
    add_run_dir(parser)
    add_ssh_config(parser)
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    parser.add_argument("--jobs", action="store_true",
                        help="one line a job instead: id, status, host:gpus (or -), why it "
                             "waits or what ended it; with --json, a list of objects")
    parser.add_argument("--gpus", action="store_true",
                        help="one line a GPU instead: who holds it (our jobs, other eq-tui "
                             "users' jobs, other processes), from the running engine")
    return parser


def run(verb: str, argv: list[str]) -> int:
    from eq_tui.cli.remote.target import parse_target

    options = parser(verb).parse_args(argv)
    config = ssh_config_path(options.ssh_config)
    target = parse_target(options.run_dir)
    if target is not None:
        from eq_tui.cli.remote.status import print_remote_status

        return print_remote_status(target, as_json=options.json, config_path=config,
                                   each_job=options.jobs, gpus=options.gpus)
    from eq_tui.cli.run_dirs import resolve
    if options.gpus:
        from eq_tui.cli.status_gpus import print_gpus

        return print_gpus(resolve(options.run_dir), as_json=options.json)
    from eq_tui.cli.status_report import print_status

    return print_status(resolve(options.run_dir), as_json=options.json, each_job=options.jobs)
