"""`eq-tui MANIFEST...`: load the manifests, build their engines, hand them to the UI or to
headless mode (--no-ui); --dry-run and --detach hand over to dry_run.py and detach.py. The one
module that builds and runs an Engine."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eq_tui import __version__
from eq_tui.cli.parsing import add_ssh_config, check_paths, new_parser, ssh_config_path
from eq_tui.errors import UsageError

if TYPE_CHECKING:
    from eq_tui.manifest.model import Manifest

DESCRIPTION = """\
Run batches of ML experiments on GPU hosts (SSH, local, simulated, Slurm): place each job on a
free GPU, launch it in a detached screen/tmux session, retry CUDA OOMs, persist every change,
resume after a crash. Full-screen UI by default; --no-ui for scripts and nohup."""

EPILOG = """\
other commands (RUN_DIR: a run dir, the manifest that ran it, or its folder when that holds one
run; or HOST:RUN_DIR, a run dir on an ssh host, with --ssh-config PATH if needed):
  eq-tui status RUN_DIR        counts by status, and the jobs that need a person; --jobs: a
                               line a job (status, host:gpus, why it waits), --gpus: a line a
                               GPU (who holds it), --json for each
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
  eq-tui explain-log LOG [MANIFEST]  what eq-tui reads from a training log, line by line (the
                               stack, each metric and report, progress, nan): check a script
  eq-tui completion SHELL      shell completion for bash, zsh or fish

acting on a queue (through its engine's control socket; a run whose engine is not running,
finished or stopped, gets one started in the background for the command; --json, --help):
  eq-tui kill|retry|requeue|hold|release RUN_DIR JOB... [--filter 'status:stuck phase:p']
  eq-tui release RUN_DIR --phase P     launch a phase the crash guard holds, as it is
  eq-tui retry RUN_DIR --stuck [--phase P]   every stuck job (of phase P) run again
  eq-tui pause|resume RUN_DIR  pause or resume launching
  eq-tui priority RUN_DIR JOB... N     higher launches first (manifest key: priority)
  eq-tui edit RUN_DIR JOB... [--set KEY=VALUE] [--add-flag KEY=VALUE] [-- NEW COMMAND...]
                               a job that is not running; a finished one runs again; --set
                               changes a flag the command has, --add-flag adds a new one
  eq-tui clone RUN_DIR JOB [--id NEW] [--set KEY=VALUE] [--add-flag KEY=VALUE] [-- COMMAND...]
  eq-tui add RUN_DIR --id ID [--phase P] [--gpus N] [--mem MIB|auto] [--exclusive]
             [--priority N] [--preempt [force]] -- COMMAND...
  eq-tui reload RUN_DIR [--dry-run] [--force]   read the manifest file again (waiting jobs
                               only; what a person changed stays unless --force)
  eq-tui drain RUN_DIR HOST [--gpus 0,1] [--now [--grace 60s]]   nothing new launches there;
                               --now: its jobs stop (grace to save) and resume elsewhere
  eq-tui undrain RUN_DIR HOST  the host takes jobs again
  these exit 0 done, 1 a job could not be acted on, 2 bad usage, 3 no engine could be reached
  (--no-start: 3 when none runs, instead of starting one)
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


def parser(verb: str = "") -> argparse.ArgumentParser:
    parser = new_parser(verb, DESCRIPTION, epilog=EPILOG)
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
                             "(after fixing what failed); with --detach, in the background")
    parser.add_argument("--rerun-changed", action="store_true",
                        help="run again every completed job whose command the manifest has "
                             "changed since (its results were of the old command); with "
                             "--detach, in the background")
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
    add_ssh_config(parser)
    parser.add_argument("--secrets-stdin", action="store_true", help=argparse.SUPPRESS)
    # a shell verb on a run with no engine starts one with this (detach.start_for_command): it
    # launches nothing and does not end until the verb's command comes, or SECONDS pass
    parser.add_argument("--await-command", type=float, metavar="SECONDS", default=0.0,
                        help=argparse.SUPPRESS)
    parser.add_argument("--version", action="version", version=f"eq-tui {__version__}")
    return parser


def run(verb: str, argv: list[str]) -> int:
    return _run(parser(verb).parse_args(argv))


def _check_options(options: argparse.Namespace) -> None:
    check_paths([*options.manifests, options.run_dir, options.ssh_config])
    if options.json and not options.no_ui and not options.dry_run:
        raise UsageError("--json needs --no-ui")
    if options.run_dir and len(options.manifests) > 1:
        raise UsageError("--run-dir takes one manifest; each manifest gets its own run dir")
    if options.on is not None:
        from eq_tui.cli.remote.target import check_host

        check_host(options.on)
        if not options.detach or options.dry_run:
            raise UsageError("--on HOST runs the engine there in the background: use it with "
                             "--detach (and without --dry-run)")
    for flag, given in (("--retry-stuck", options.retry_stuck),
                        ("--rerun-changed", options.rerun_changed)):
        if given and (options.dry_run or options.on is not None):
            raise UsageError(f"{flag} runs the queue: not with --dry-run (which launches "
                             "nothing; it lists the jobs) or --on (act on the run there with "
                             "`eq-tui retry|edit HOST:RUN_DIR JOB...`)")
    if options.poll is not None and not options.poll > 0:
        raise UsageError(f"--poll must be a positive number of seconds, not {options.poll}")


def _run(options: argparse.Namespace) -> int:
    _check_options(options)
    ssh_config = ssh_config_path(options.ssh_config or None)
    import asyncio  # here, not at the top: `eq-tui --help` needs none of it (40 ms)

    from eq_tui.engine.state.store import archive_run_dir
    from eq_tui.manifest.loader import load_manifest
    from eq_tui.manifest.secrets import handed_over, load_for_run
    from eq_tui.runfiles.paths import default_run_dir

    manifests = load_for_run([load_manifest(path) for path in options.manifests],
                             from_stdin=options.secrets_stdin, warn=not options.dry_run)
    projects = [m.project for m in manifests]
    run_dirs = [Path(options.run_dir) if options.run_dir else
                default_run_dir(m.source, m.project) for m in manifests]
    if len(set(map(str, (d.resolve() for d in run_dirs)))) != len(run_dirs):
        raise UsageError(f"two manifests share a run dir (projects {', '.join(projects)}); "
                         "give each its own project name")
    if options.on is not None:
        from eq_tui.cli.remote.on_host import start_on_host

        if len(set(projects)) != len(projects):
            raise UsageError(f"two manifests share a project name ({', '.join(projects)}); on "
                             f"{options.on} each project gets ~/.eq-tui/runs/<project>/")
        return start_on_host(options.on, [(Path(m.source), m.project) for m in manifests],
                             run_dir=options.run_dir, poll=options.poll, fresh=options.fresh,
                             config_path=ssh_config,
                             secrets=[handed_over(m) for m in manifests])
    if options.dry_run:
        from eq_tui.cli.dry_run import print_plan

        return asyncio.run(print_plan(manifests, run_dirs, as_json=options.json,
                                      ssh_config=ssh_config))
    if options.fresh:
        for run_dir in run_dirs:
            _refuse_if_locked(run_dir)
            moved = archive_run_dir(run_dir)
            if moved is not None:
                print(f"eq-tui: archived the previous run dir to {moved}", file=sys.stderr)
    if options.detach:
        from eq_tui.cli.detach import start_detached

        for run_dir in run_dirs:
            _refuse_if_locked(run_dir)
        return start_detached(options.manifests, run_dirs, options.poll,
                              [handed_over(m) for m in manifests], ssh_config=ssh_config,
                              extra=_engine_flags(options))
    return asyncio.run(_run_engines(options, manifests, run_dirs, ssh_config))


def _engine_flags(options: argparse.Namespace) -> list[str]:
    """What --detach hands on to the engine it starts."""
    flags = ["--retry-stuck"] if options.retry_stuck else []
    flags += ["--rerun-changed"] if options.rerun_changed else []
    if options.await_command:
        flags += ["--await-command", str(options.await_command)]
    return flags


def _refuse_if_locked(run_dir: Path) -> None:
    from eq_tui.engine.state.store import RunDir

    if not run_dir.exists():
        return
    probe = RunDir(run_dir)
    probe.acquire_lock()
    probe.release_lock()


async def _after_start(engine: Any, manifest: Manifest, options: argparse.Namespace, *,
                       multi: bool) -> None:
    """--no-ui prints what starting said (preflight warnings, stuck jobs from an earlier run,
    commands changed): it subscribes only afterwards. --retry-stuck retries them;
    --rerun-changed runs again the completed jobs whose command changed."""
    import json

    from eq_tui.api.events import event_from_json
    from eq_tui.cli.headless import format_event
    from eq_tui.cli.rerun_flags import rerun_changed, retry_stuck

    if options.no_ui:
        for alert in engine.ctx.bus.alerts:
            line = json.dumps(alert) if options.json else \
                format_event(event_from_json(alert), with_project=multi)
            print(line, flush=True)
    if options.retry_stuck:
        line = await retry_stuck(engine)
        print(f"eq-tui: {line or 'no stuck jobs to retry'}", file=sys.stderr)
    if options.rerun_changed:
        line = await rerun_changed(engine, manifest)
        print(f"eq-tui: {line or 'no completed job ran a command the manifest has changed'}",
              file=sys.stderr)


def _first_missing(path: Path) -> Path:
    """The outermost folder of `path` that does not exist yet."""
    while not path.parent.exists() and path.parent != path:
        path = path.parent
    return path


async def _run_engines(options: argparse.Namespace, manifests: list, run_dirs: list[Path],
                       ssh_config: str | None) -> int:
    import asyncio

    from eq_tui.engine.commands.control_server import serve_control
    from eq_tui.engine.engine import Engine
    from eq_tui.hosts.factory import make_hosts
    from eq_tui.notify.notifier import serve_notifications

    engines: list[Engine] = []
    # run dirs this command makes (sim hosts make theirs in make_hosts), each with the outermost
    # folder that making it makes (experiment_queue/ itself on a first run)
    fresh: list[tuple[Path, Path]] = []
    try:
        for manifest, run_dir in zip(manifests, run_dirs, strict=True):
            if not run_dir.exists():
                fresh.append((run_dir, _first_missing(run_dir)))
            poll = options.poll or manifest.poll or 2.0
            hosts = make_hosts(manifest, run_dir, ssh_config=ssh_config)
            engine = Engine(manifest, run_dir, hosts, poll=poll, exit_when_done=options.no_ui,
                            await_command=options.await_command)
            await engine.start()
            engines.append(engine)
            await _after_start(engine, manifest, options, multi=len(manifests) > 1)
            await serve_control(engine, run_dir)
            await serve_notifications(engine, run_dir)
    except BaseException:
        for engine in engines:
            engine.run_dir.release_lock()
        started = {engine.run_dir.path for engine in engines}
        for run_dir, made in fresh:
            if run_dir not in started:  # refused before it ran: leave nothing behind
                shutil.rmtree(made, ignore_errors=True)
        raise
    if options.no_ui:
        from eq_tui.cli.headless import Headless

        async def run_all() -> list[int]:
            return list(await asyncio.gather(*(engine.run() for engine in engines)))

        return await Headless(list(engines), json_mode=options.json).run(run_all)
    from eq_tui.tui.launch import run_app

    return await run_app(engines, theme=options.theme)
