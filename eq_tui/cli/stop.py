"""`eq-tui stop [HOST:]RUN_DIR`: stop a running engine; its jobs keep running and the next run
resumes them."""

from __future__ import annotations

import argparse

from eq_tui.cli.parsing import add_run_dir, add_ssh_config, new_parser, ssh_config_path


def parser(verb: str = "stop") -> argparse.ArgumentParser:
    parser = new_parser(verb, "Stop a running engine; its jobs keep running and the next run "
                              "resumes them.")
    add_run_dir(parser)
    add_ssh_config(parser)
    return parser


def run(verb: str, argv: list[str]) -> int:
    from eq_tui.cli.remote.target import parse_target

    options = parser(verb).parse_args(argv)
    config = ssh_config_path(options.ssh_config)
    target = parse_target(options.run_dir)
    if target is not None:
        from eq_tui.cli.remote.status import stop_remote_engine

        return stop_remote_engine(target, config_path=config)
    from eq_tui.cli.detach import stop_engine
    from eq_tui.cli.run_dirs import resolve

    return stop_engine(resolve(options.run_dir))
