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
other commands (RUN_DIR may be HOST:RUN_DIR, a run dir on an ssh host; add --ssh-config PATH):
  eq-tui status RUN_DIR        counts by status, and the jobs that need a person
  eq-tui attach RUN_DIR        the UI on an engine that is already running (q detaches);
                               --resume starts it in the background first if it is not running
  eq-tui stop RUN_DIR          stop a running engine (its jobs keep running)

in the background on an ssh host:
  eq-tui MANIFEST --detach --on HOST    sends the manifest to ~/.eq-tui/runs/<project>/ there,
                               starts the engine there (eq-tui must be installed on HOST), and
                               prints the attach/status/stop commands for HOST:RUN_DIR

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
                        help="seconds between full probes of every host; each host's watcher "
                             "reports exits and freed GPUs in between (default: the "
                             "manifest's poll, else 2)")
    parser.add_argument("--theme", metavar="NAME", help="UI theme (eq-dark, eq-light, eq-ansi, "
                        "or one of yours in the config dir)")
    parser.add_argument("--detach", action="store_true",
                        help="start the engine in the background, print how to attach, return "
                             "(a run that has already finished: say so, exit with its queue's "
                             "exit code)")
    parser.add_argument("--on", metavar="HOST",
                        help="with --detach: run the engine on this ssh host (alias, or "
                             "user@host[:port]); --run-dir is then a path there")
    parser.add_argument("--ssh-config", metavar="PATH",
                        help="ssh config file to use instead of ~/.ssh/config")
    parser.add_argument("--version", action="version", version=f"eq-tui {__version__}")
    return parser


RUN_DIR_HELP = ("a run dir here, or HOST:RUN_DIR on an ssh host (an existing local path "
                "wins)")


def build_status_parser() -> argparse.ArgumentParser:
    parser = build_run_dir_parser("status", "Counts by status and the jobs that need a person.")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    return parser


def build_run_dir_parser(command: str, description: str) -> argparse.ArgumentParser:
    parser = _Parser(prog=f"eq-tui {command}", description=description)
    parser.add_argument("run_dir", metavar="[HOST:]RUN_DIR", help=RUN_DIR_HELP)
    parser.add_argument("--ssh-config", metavar="PATH",
                        help="ssh config file to use instead of ~/.ssh/config")
    if command == "attach":
        parser.add_argument("--theme", metavar="NAME", help="UI theme")
        parser.add_argument("--resume", action="store_true",
                            help="if no engine is running there, start it in the background "
                                 "first (from the manifest its run dir records)")
    return parser


def _ssh_config(value: str | None) -> str | None:
    if value is None:
        return None
    _check_paths([value])
    if not Path(value).is_file():
        raise UsageError(f"--ssh-config {value}: no such file")
    return str(Path(value).resolve())


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in ("status", "stop", "attach"):
            return _run_dir_command(args[0], args[1:])
        options = build_parser().parse_args(args)
        return _run(options)
    except EqTuiError as exc:
        print(f"eq-tui: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("eq-tui: interrupted; jobs keep running in their sessions", file=sys.stderr)
        return 130


def _run_dir_command(command: str, rest: list[str]) -> int:
    from eq_tui.remote.target import parse_target

    if command == "status":
        parser = build_status_parser()
    elif command == "stop":
        parser = build_run_dir_parser("stop", "Stop a running engine; its jobs keep running "
                                      "and the next run resumes them.")
    else:
        parser = build_run_dir_parser("attach", "The UI on an engine that is already running.")
    options = parser.parse_args(rest)
    config = _ssh_config(options.ssh_config)
    target = parse_target(options.run_dir)
    if command == "attach":
        from eq_tui.attach import attach

        return attach(options.run_dir, theme=options.theme, resume=options.resume,
                      config_path=config)
    if command == "status":
        if target is not None:
            from eq_tui.remote.status import print_remote_status

            return print_remote_status(target, as_json=options.json, config_path=config)
        from eq_tui.status import print_status

        return print_status(Path(options.run_dir), as_json=options.json)
    if target is not None:
        from eq_tui.remote.status import stop_remote_engine

        return stop_remote_engine(target, config_path=config)
    from eq_tui.detach import stop_engine

    return stop_engine(Path(options.run_dir))


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
    if options.on is not None:
        from eq_tui.remote.target import check_host

        check_host(options.on)
        if not options.detach or options.dry_run:
            raise UsageError("--on HOST runs the engine there in the background: use it with "
                             "--detach (and without --dry-run)")
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
    if options.on is not None:
        from eq_tui.remote.on_host import start_on_host

        if len(set(projects)) != len(projects):
            raise UsageError(f"two manifests share a project name ({', '.join(projects)}); on "
                             f"{options.on} each project gets ~/.eq-tui/runs/<project>/")
        return start_on_host(options.on, [(Path(m.source), m.project) for m in manifests],
                             run_dir=options.run_dir, poll=options.poll, fresh=options.fresh,
                             config_path=_ssh_config(options.ssh_config))
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
