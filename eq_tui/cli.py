"""Command line: parse, load manifests, build engines, hand them to the UI or to headless mode.

Every expected failure ends as a message and an exit code (2 usage/manifest, 3 host/run dir,
130 interrupted), never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from eq_tui import __version__
from eq_tui.errors import EqTuiError, UsageError

DESCRIPTION = """\
Run batches of ML experiments on GPU hosts (SSH, local, simulated, Slurm): place each job on a
free GPU, launch it in a detached screen/tmux session, retry CUDA OOMs, persist every change,
resume after a crash. Full-screen UI by default; --no-ui for scripts and nohup."""

EPILOG = """\
other commands:
  eq-tui status RUN_DIR        counts by status, and the jobs that need a person
  eq-tui attach RUN_DIR        the UI on an engine that is already running
  eq-tui stop RUN_DIR          stop a running engine (its jobs keep running)

exit codes: 0 every job completed; 1 finished with jobs stuck, killed or blocked;
2 invalid manifest or usage; 3 a host or the run dir could not be used; 130 interrupted
(jobs keep running in their sessions; the same command resumes them)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}\n(see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="eq-tui", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("manifests", nargs="+", metavar="MANIFEST",
                        help="manifest file(s), YAML or JSON; several run side by side")
    parser.add_argument("--no-ui", action="store_true",
                        help="no UI: a status line per change and a summary every 30 s")
    parser.add_argument("--json", action="store_true",
                        help="with --no-ui: one JSON event per line on stdout")
    parser.add_argument("--dry-run", action="store_true",
                        help="validate, expand, preflight the hosts and print the plan; "
                             "launch nothing")
    parser.add_argument("--run-dir", metavar="DIR",
                        help="where run state lives (default: experiment_queue/<project>/ "
                             "beside the manifest); one manifest only")
    parser.add_argument("--fresh", action="store_true",
                        help="archive the existing run dir (timestamp suffix) and start over")
    parser.add_argument("--poll", type=float, metavar="SECONDS",
                        help="probe interval (default: the manifest's poll, else 2)")
    parser.add_argument("--theme", metavar="NAME", help="UI theme (eq-dark, eq-light, eq-ansi, "
                        "or one of yours in the config dir)")
    parser.add_argument("--detach", action="store_true",
                        help="start the engine in the background, print how to attach, return")
    parser.add_argument("--ssh-config", metavar="PATH",
                        help="ssh config file to use instead of ~/.ssh/config")
    parser.add_argument("--version", action="version", version=f"eq-tui {__version__}")
    return parser


def build_status_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="eq-tui status",
                     description="Counts by status and the jobs that need a person.")
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    return parser


def build_run_dir_parser(command: str, description: str) -> argparse.ArgumentParser:
    parser = _Parser(prog=f"eq-tui {command}", description=description)
    parser.add_argument("run_dir", metavar="RUN_DIR")
    if command == "attach":
        parser.add_argument("--theme", metavar="NAME", help="UI theme")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] == "status":
            from eq_tui.status import print_status

            status_args = build_status_parser().parse_args(args[1:])
            return print_status(Path(status_args.run_dir), as_json=status_args.json)
        if args and args[0] == "stop":
            from eq_tui.detach import stop_engine

            stop_args = build_run_dir_parser("stop", "Stop a running engine; its jobs keep "
                                             "running and the next run resumes them."
                                             ).parse_args(args[1:])
            return stop_engine(Path(stop_args.run_dir))
        if args and args[0] == "attach":
            from eq_tui.attach import attach

            attach_args = build_run_dir_parser("attach", "The UI on an engine that is already "
                                               "running.").parse_args(args[1:])
            return attach(Path(attach_args.run_dir), theme=attach_args.theme)
        options = build_parser().parse_args(args)
        return _run(options)
    except EqTuiError as exc:
        print(f"eq-tui: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("eq-tui: interrupted; jobs keep running in their sessions", file=sys.stderr)
        return 130


def _check_paths(values: Sequence[str | None]) -> None:
    for value in values:
        if value is not None and "\0" in value:
            raise UsageError(f"{value!r}: a path cannot contain a NUL byte")


def _check_options(options: argparse.Namespace) -> None:
    _check_paths([*options.manifests, options.run_dir, options.ssh_config])
    if options.json and not options.no_ui and not options.dry_run:
        raise UsageError("--json needs --no-ui")
    if options.run_dir and len(options.manifests) > 1:
        raise UsageError("--run-dir takes one manifest; each manifest gets its own run dir")
    if options.poll is not None and not options.poll > 0:
        raise UsageError(f"--poll must be a positive number of seconds, not {options.poll}")
    if options.ssh_config:
        if not Path(options.ssh_config).is_file():
            raise UsageError(f"--ssh-config {options.ssh_config}: no such file")
        os.environ["EQ_TUI_SSH_CONFIG"] = str(Path(options.ssh_config).resolve())


def _run(options: argparse.Namespace) -> int:
    _check_options(options)
    from eq_tui.engine.store import archive_run_dir, default_run_dir
    from eq_tui.manifest.loader import load_manifest

    manifests = [load_manifest(path) for path in options.manifests]
    projects = [m.project for m in manifests]
    run_dirs = [Path(options.run_dir) if options.run_dir else
                default_run_dir(m.source, m.project) for m in manifests]
    if len(set(map(str, (d.resolve() for d in run_dirs)))) != len(run_dirs):
        raise UsageError(f"two manifests share a run dir (projects {', '.join(projects)}); "
                         "give each its own project name")
    if options.dry_run:
        from eq_tui.plan import print_plan

        return asyncio.run(print_plan(manifests, run_dirs, as_json=options.json))
    if options.fresh:
        for run_dir in run_dirs:
            _refuse_if_locked(run_dir)
            moved = archive_run_dir(run_dir)
            if moved is not None:
                print(f"eq-tui: archived the previous run dir to {moved}", file=sys.stderr)
    if options.detach:
        from eq_tui.detach import start_detached

        for run_dir in run_dirs:
            _refuse_if_locked(run_dir)
        return start_detached(options.manifests, run_dirs, options.poll)
    return asyncio.run(_run_engines(options, manifests, run_dirs))


def _refuse_if_locked(run_dir: Path) -> None:
    from eq_tui.engine.store import RunDir

    if not run_dir.exists():
        return
    probe = RunDir(run_dir)
    probe.acquire_lock()
    probe.release_lock()


async def _run_engines(options: argparse.Namespace, manifests: list, run_dirs: list[Path]) -> int:
    from eq_tui.engine.engine import Engine
    from eq_tui.hosts.factory import make_hosts

    engines: list[Engine] = []
    try:
        for manifest, run_dir in zip(manifests, run_dirs, strict=True):
            poll = options.poll or manifest.poll or 2.0
            hosts = make_hosts(manifest, run_dir)
            engine = Engine(manifest, run_dir, hosts, poll=poll, exit_when_done=options.no_ui)
            await engine.start()
            engines.append(engine)
    except BaseException:
        for engine in engines:
            engine.run_dir.release_lock()
        raise
    if options.no_ui:
        from eq_tui.headless import Headless

        return await Headless(engines, json_mode=options.json).run()
    from eq_tui.tui.launch import run_app

    return await run_app(engines, theme=options.theme)
