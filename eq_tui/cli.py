"""Command line: parse, load manifests, build engines, hand them to the UI or to headless mode.

Every expected failure ends as a message and an exit code (2 usage/manifest, 3 host/run dir,
130 interrupted), never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eq_tui import __version__
from eq_tui.errors import EqTuiError, UsageError
from eq_tui.shell_verbs import VERBS
from eq_tui.tools import TOOL_COMMANDS, tool_command

DESCRIPTION = """\
Run batches of ML experiments on GPU hosts (SSH, local, simulated, Slurm): place each job on a
free GPU, launch it in a detached screen/tmux session, retry CUDA OOMs, persist every change,
resume after a crash. Full-screen UI by default; --no-ui for scripts and nohup."""

EPILOG = """\
other commands (RUN_DIR may be HOST:RUN_DIR, a run dir on an ssh host; add --ssh-config PATH):
  eq-tui status RUN_DIR        counts by status, and the jobs that need a person; --jobs: a
                               line a job (status, host:gpus, why it waits), --json for both
  eq-tui attach RUN_DIR        the UI on an engine that is already running (q detaches);
                               --resume starts it in the background first if it is not running,
                               and hands a running one the secrets it lacks
  eq-tui stop RUN_DIR          stop a running engine (its jobs keep running)
  eq-tui results RUN_DIR       the results table: mean ± std over seeds per configuration
                               (--format table|csv|json|markdown|latex, --metric, --by)

to write a manifest and set up the tool:
  eq-tui init                  write a commented manifest: --cmd "python train.py --lr {1e-3,3e-4}"
                               --hosts box1,box2 [--conda ENV] [-o PATH] (asks at a terminal)
  eq-tui schema                the manifest's JSON Schema, for editor completion
  eq-tui completion SHELL      shell completion for bash, zsh or fish

acting on a running queue (through its engine's control socket; --json, --help on each):
  eq-tui kill|retry|requeue|hold|release RUN_DIR JOB... [--filter 'status:stuck phase:p']
  eq-tui pause|resume RUN_DIR  pause or resume launching
  eq-tui priority RUN_DIR JOB... N     higher launches first (manifest key: priority)
  eq-tui edit RUN_DIR JOB... [--set KEY=VALUE] [-- NEW COMMAND...]
                               a job that is not running; a finished one runs again
  eq-tui clone RUN_DIR JOB [--id NEW] [--set KEY=VALUE] [-- COMMAND...]
  eq-tui add RUN_DIR --id ID [--phase P] [--gpus N] [--mem MIB|auto] [--exclusive]
             [--priority N] -- COMMAND...
  eq-tui reload RUN_DIR [--dry-run]    read the manifest file again (waiting jobs only)
  these exit 0 done, 1 a job could not be acted on, 2 bad usage, 3 no engine runs there
  eq-tui notify-test MANIFEST  send one test message to every notify: target (exit 1 if one
                               fails)

in the background on an ssh host:
  eq-tui MANIFEST --detach --on HOST    sends the manifest to ~/.eq-tui/runs/<project>/ there,
                               starts the engine there (eq-tui must be installed on HOST), and
                               prints the attach/status/stop commands for HOST:RUN_DIR

`eq-tui status` exits 1 when jobs need a person (stuck, killed, blocked), else 0.

exit codes: 0 every job completed; 1 finished with jobs stuck, killed or blocked;
2 invalid manifest or usage; 3 a host or the run dir could not be used (nothing is left
behind by a run refused at preflight); 0 also when you quit the UI with q (jobs keep running
in their sessions; the same command resumes them); 130 interrupted by a signal."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # main() prefixes "eq-tui: "; a subcommand adds its own name once
        command = self.prog.removeprefix("eq-tui").strip()
        where = f"{command}: " if command else ""
        raise UsageError(f"{where}{message}\n(see `{self.prog} --help`)")


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
    parser.add_argument("--retry-stuck", action="store_true",
                        help="retry every job left stuck by an earlier run of this run dir "
                             "(after fixing what failed)")
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
    parser.add_argument("--secrets-stdin", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--version", action="version", version=f"eq-tui {__version__}")
    return parser


RUN_DIR_HELP = ("a run dir here, or HOST:RUN_DIR on an ssh host (an existing local path "
                "wins)")


def build_status_parser() -> argparse.ArgumentParser:
    parser = build_run_dir_parser("status", "Counts by status and the jobs that need a person.")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    parser.add_argument("--jobs", action="store_true",
                        help="one line a job instead: id, status, host:gpus (or -), why it "
                             "waits or what ended it; with --json, a list of objects")
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
                                 "first (from the manifest its run dir records); if one is, "
                                 "hand it the secrets it lacks from this environment")
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
        if args and args[0] == "results":
            from eq_tui.results_cli import main as results_main

            return results_main(args[1:])
        if args and args[0] in ("status", "stop", "attach"):
            return _run_dir_command(args[0], args[1:])
        if args and args[0] in TOOL_COMMANDS:
            return tool_command(args[0], args[1:])
        if args and args[0] in VERBS:
            from eq_tui.shell_commands import run_verb

            return run_verb(args[0], args[1:])
        if args and args[0] == "notify-test":
            return _notify_test(args[1:])
        options = build_parser().parse_args(args)
        return _run(options)
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

            return print_remote_status(target, as_json=options.json, config_path=config,
                                       each_job=options.jobs)
        from eq_tui.status import print_status

        return print_status(Path(options.run_dir), as_json=options.json,
                            each_job=options.jobs)
    if target is not None:
        from eq_tui.remote.status import stop_remote_engine

        return stop_remote_engine(target, config_path=config)
    from eq_tui.detach import stop_engine

    return stop_engine(Path(options.run_dir))


def _notify_test(rest: list[str]) -> int:
    parser = _Parser(prog="eq-tui notify-test",
                     description="Send one test message to every notify: target of MANIFEST.")
    parser.add_argument("manifest", metavar="MANIFEST")
    options = parser.parse_args(rest)
    _check_paths([options.manifest])
    from eq_tui.manifest.loader import load_manifest
    from eq_tui.notify.notifier import send_test

    manifest = load_manifest(options.manifest)
    if not manifest.notify:
        raise UsageError(f"{options.manifest}: no 'notify:' targets to test")
    results = asyncio.run(send_test(manifest.notify, manifest.project))
    for label, error in results.items():
        print(f"{label}: {'ok' if error is None else 'FAILED: ' + error}")
    return 0 if all(error is None for error in results.values()) else 1


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
    if options.retry_stuck and (options.detach or options.dry_run):
        raise UsageError("--retry-stuck runs the queue here: not with --detach or --dry-run "
                         "(attach and press r instead)")
    if options.poll is not None and not options.poll > 0:
        raise UsageError(f"--poll must be a positive number of seconds, not {options.poll}")


def _run(options: argparse.Namespace) -> int:
    _check_options(options)
    ssh_config = _ssh_config(options.ssh_config or None)
    from eq_tui.engine.store import archive_run_dir, default_run_dir
    from eq_tui.manifest.loader import load_manifest
    from eq_tui.manifest.secrets import handed_over, load_for_run

    manifests = load_for_run([load_manifest(path) for path in options.manifests],
                             from_stdin=options.secrets_stdin, warn=not options.dry_run)
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
                             config_path=ssh_config,
                             secrets=[handed_over(m) for m in manifests])
    if options.dry_run:
        from eq_tui.plan import print_plan

        return asyncio.run(print_plan(manifests, run_dirs, as_json=options.json,
                                      ssh_config=ssh_config))
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
        return start_detached(options.manifests, run_dirs, options.poll,
                              [handed_over(m) for m in manifests], ssh_config=ssh_config)
    return asyncio.run(_run_engines(options, manifests, run_dirs, ssh_config))


def _refuse_if_locked(run_dir: Path) -> None:
    from eq_tui.engine.store import RunDir

    if not run_dir.exists():
        return
    probe = RunDir(run_dir)
    probe.acquire_lock()
    probe.release_lock()


async def _after_start(engine: Any, options: argparse.Namespace, *, multi: bool) -> None:
    """--no-ui prints what starting said (preflight warnings, stuck jobs from an earlier run,
    commands changed): it subscribes only afterwards. --retry-stuck retries them."""
    import json

    from eq_tui.engine.events import event_from_json
    from eq_tui.engine.rerun import retry_stuck
    from eq_tui.headless import format_event

    if options.no_ui:
        for alert in engine.ctx.bus.alerts:
            line = json.dumps(alert) if options.json else \
                format_event(event_from_json(alert), with_project=multi)
            print(line, flush=True)
    if options.retry_stuck:
        line = await retry_stuck(engine)
        print(f"eq-tui: {line or 'no stuck jobs to retry'}", file=sys.stderr)


async def _run_engines(options: argparse.Namespace, manifests: list, run_dirs: list[Path],
                       ssh_config: str | None) -> int:
    from eq_tui.engine.control import serve_control
    from eq_tui.engine.engine import Engine
    from eq_tui.hosts.factory import make_hosts
    from eq_tui.notify.notifier import serve_notifications

    engines: list[Engine] = []
    fresh: list[Path] = []  # run dirs this command makes (sim hosts make theirs in make_hosts)
    try:
        for manifest, run_dir in zip(manifests, run_dirs, strict=True):
            if not run_dir.exists():
                fresh.append(run_dir)
            poll = options.poll or manifest.poll or 2.0
            hosts = make_hosts(manifest, run_dir, ssh_config=ssh_config)
            engine = Engine(manifest, run_dir, hosts, poll=poll, exit_when_done=options.no_ui)
            await engine.start()
            engines.append(engine)
            await _after_start(engine, options, multi=len(manifests) > 1)
            await serve_control(engine, run_dir)
            await serve_notifications(engine, run_dir)
    except BaseException:
        for engine in engines:
            engine.run_dir.release_lock()
        started = {engine.run_dir.path for engine in engines}
        for run_dir in fresh:
            if run_dir not in started:  # refused before it ran: leave nothing behind
                shutil.rmtree(run_dir, ignore_errors=True)
        raise
    if options.no_ui:
        from eq_tui.headless import Headless

        async def run_all() -> list[int]:
            return list(await asyncio.gather(*(engine.run() for engine in engines)))

        return await Headless(list(engines), json_mode=options.json).run(run_all)
    from eq_tui.tui.launch import run_app

    return await run_app(engines, theme=options.theme)
