"""`eq-tui attach [HOST:]RUN_DIR`: the full UI on an engine that is already running, through its
control socket (reached over SSH for HOST:RUN_DIR). Quitting the UI detaches; the engine keeps
scheduling. When no engine runs there, say so and offer to start it (`--resume`, or y/N at a
terminal)."""

from __future__ import annotations

import argparse
import asyncio
import json
import posixpath
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from eq_tui.api.control_client import MAX_LINE, ControlClient, find_socket
from eq_tui.api.model import FINISHED, JobState, status_counts
from eq_tui.api.reconnecting import Connector, ReconnectingClient, Streams
from eq_tui.cli.parsing import add_run_dir, add_ssh_config, new_parser, ssh_config_path
from eq_tui.cli.remote.target import RemoteTarget, command_line, parse_target
from eq_tui.errors import RunDirError
from eq_tui.manifest.secrets import values_here

if TYPE_CHECKING:
    from eq_tui.tui.app import EqTuiApp


class EngineNotRunning(RunDirError):
    """No engine answers for a run dir whose queue still has work; `start` starts one."""

    def __init__(self, message: str, question: str, start: Callable[[], None]) -> None:
        super().__init__(message)
        self.question = question
        self.start = start


def unfinished(jobs: list[JobState]) -> int:
    return sum(1 for job in jobs if job.status not in FINISHED)


def finished_here(where: str, jobs: list[JobState], config_path: str | None = None) -> str:
    """No engine runs for a run whose queue has finished: what to do about it (a shell verb
    starts the engine again for its command; attach then watches)."""
    needing = [job.id for job in jobs if job.status.needs_person]
    counts = ", ".join(f"{status} {n}" for status, n in status_counts(jobs).items())
    ids = " ".join(map(shlex.quote, needing)) if 0 < len(needing) <= 5 else "JOB..."
    return (f"no engine is running for {where} (its queue has finished: {counts}); "
            f"`{command_line('retry', where, config_path, ids)}` runs jobs again (it starts "
            f"the engine in the background; so do edit, requeue, add...), then "
            f"`{command_line('attach', where, config_path)}` watches them; "
            f"`{command_line('status', where, config_path)}` shows the run")


async def run_attached(client: ControlClient, *, where: str, theme: str | None,
                       config_path: str | None = None) -> int:
    """The UI on `client` until the user quits, stops the engine, or the engine goes away."""
    from eq_tui.tui.app import EqTuiApp

    app = EqTuiApp([client], theme=theme, detach_on_quit=True,
                   attach_hint=command_line("attach", where, config_path))
    status = command_line("status", where, config_path)
    watcher = asyncio.create_task(tell_when_gone(app, client, status))
    try:
        await app.run_async()
    finally:
        watcher.cancel()
        await client.close()
    if app.engine_stopped:
        print(f"eq-tui: stopped the engine of {where}; its jobs keep running in their sessions")
    elif app.engine_gone and not client.snapshot().get("finished"):
        print(f"eq-tui: the engine of {where} is gone (stopped, or the connection dropped); "
              f"`{status}` shows where the queue stands", file=sys.stderr)
        return 3
    return 0


async def tell_when_gone(app: EqTuiApp, client: ControlClient, status: str) -> None:
    """Once the engine's stream has ended for good, say why in the UI: a finished queue whose
    engine exited (a normal end), or an engine gone or out of reach."""
    await client.wait_closed()
    if app.engine_stopped or not app.is_running:
        return
    if client.snapshot().get("finished"):
        app.show_engine_gone("The queue finished and its engine exited; q leaves.",
                             finished=True)
    else:
        app.show_engine_gone(f"The engine is gone (stopped, or the connection dropped); "
                             f"this is its last state. `{status}` shows where the queue "
                             f"stands.", finished=False)


# ---- secrets an engine lacks -------------------------------------------------------------

async def hand_over_secrets(client: ControlClient, saved: object, *, where: str,
                            relative_to: str | None, config_path: str | None = None) -> None:
    """`attach --resume` on a running engine: read here the secrets it lacks (as its run's
    manifest.json, `saved`, says where they live) and hand them over the control stream, into
    its memory; say which it got and which it still lacks."""
    record = saved if isinstance(saved, dict) else {}
    project, source = str(record.get("project") or ""), str(record.get("source") or "")
    try:
        answer = await client.provide_secrets({}, project)
        if answer["error"] or not answer["missing"]:
            if answer["error"]:
                print(f"eq-tui: {where}: {answer['error']}", file=sys.stderr)
            return
        values, lacking = values_here(record.get("env"), source, relative_to=relative_to,
                                      names=answer["missing"])
        if values:
            answer = await client.provide_secrets(values, project)
    except RuntimeError as exc:  # an engine from before this request
        print(f"eq-tui: the engine of {where} takes no secrets while it runs ({exc}); stop it "
              f"and resume it from here", file=sys.stderr)
        return
    except ConnectionError as exc:
        print(f"eq-tui: could not hand the engine of {where} its secrets ({exc})",
              file=sys.stderr)
        return
    resume = f"`{command_line('attach', where, config_path)} --resume`"
    if answer["given"]:
        print(f"eq-tui: handed the engine of {where} the secrets it lacked: "
              f"{', '.join(answer['given'])} (over its control socket, into its memory only)",
              file=sys.stderr)
    for name, why in answer["refused"].items():
        print(f"eq-tui: the engine of {where} refused secret {name}: {why}", file=sys.stderr)
    for name in answer["missing"]:
        why = lacking.get(name, "not readable here")
        print(f"eq-tui: the engine of {where} still lacks secret {name} ({why}); its jobs wait "
              f"until {resume} runs where it is set", file=sys.stderr)


# ---- local ---------------------------------------------------------------------------------

def _saved_manifest(run_dir: Path) -> object:
    try:
        return json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None


def _local_source(run_dir: Path) -> str | None:
    from eq_tui.cli.detach import recorded_manifest

    return recorded_manifest(run_dir)


def _not_running_here(run_dir: Path, config_path: str | None) -> RunDirError:
    from eq_tui.cli.status_report import load_jobs

    if not (run_dir / "queue_state.json").exists():
        return RunDirError(f"{run_dir} is not an eq-tui run dir")
    _, jobs = load_jobs(run_dir)
    source = _local_source(run_dir)
    left = unfinished(jobs)
    if not left:
        return RunDirError(finished_here(str(run_dir), jobs))
    if source is None:
        return RunDirError(f"no engine is running for {run_dir} (it records no manifest); "
                           f"`{command_line('status', str(run_dir))}` shows it")

    def start() -> None:
        from eq_tui.cli.detach import start_detached

        start_detached([source], [run_dir], None, ssh_config=config_path)

    return EngineNotRunning(
        f"no engine is running for {run_dir} ({left} of {len(jobs)} jobs not finished); "
        f"resume it with `{command_line('attach', str(run_dir))} --resume` (starts it in the "
        f"background from {source}), or `eq-tui {shlex.quote(source)} --run-dir "
        f"{shlex.quote(str(run_dir))}` in the foreground",
        "Start it now in the background?", start)


def local_connector(run_dir: Path) -> Connector:
    """Streams to the engine's socket; None once the engine has removed its pointer (it
    stopped). A socket nobody answers on (a killed engine) is tried again for a while."""

    async def connect() -> Streams | None:
        path = find_socket(run_dir)
        if path is None:
            return None
        return await asyncio.open_unix_connection(str(path), limit=64 * MAX_LINE)

    return connect


async def _attach_local(run_dir: Path, theme: str | None, config_path: str | None,
                        resume: bool) -> int:
    try:
        client = await ReconnectingClient.open(local_connector(run_dir), where=str(run_dir),
                                               local_logs=True)
    except (OSError, ConnectionError, RuntimeError):
        client = None
    if client is None:
        raise _not_running_here(run_dir, config_path)
    if resume:
        source = _local_source(run_dir)
        await hand_over_secrets(client, _saved_manifest(run_dir), where=str(run_dir),
                                relative_to=str(Path(source).resolve().parent) if source
                                else None)
    return await run_attached(client, where=str(run_dir), theme=theme)


# ---- remote --------------------------------------------------------------------------------

async def _attach_remote(target: RemoteTarget, theme: str | None, config_path: str | None,
                         resume: bool) -> int:
    from eq_tui.cli.remote.link import open_link
    from eq_tui.cli.remote.status import saved_state
    from eq_tui.cli.status_report import jobs_from_state

    link = await open_link(target.host, config_path, read_from=str(target))

    async def connect() -> Streams | None:
        return await link.streams(await link.locate(target))  # the link reconnects itself

    try:
        located = await link.locate(target)
        client = await ReconnectingClient.open(connect, where=str(located))
        if client is None:
            saved = await saved_state(link, located)
            jobs = jobs_from_state(saved, f"{located}/queue_state.json")
            left = unfinished(jobs)
            where = str(located)
            if not left:
                raise RunDirError(finished_here(where, jobs, config_path))
            raise EngineNotRunning(
                f"no engine is running for {where} ({left} of {len(jobs)} jobs not finished); "
                f"resume it with `{command_line('attach', where, config_path)} --resume` "
                f"(starts it on {target.host} in the background, from its manifest copy there)",
                f"Start it now on {target.host}, in the background?",
                lambda: asyncio.run(_resume_remote(target, config_path)))
        if resume:
            saved = await link.read_json(posixpath.join(located.path, "manifest.json"))
            await hand_over_secrets(client, saved, where=str(located), relative_to=None,
                                    config_path=config_path)
        return await run_attached(client, where=str(located), theme=theme,
                                  config_path=config_path)
    finally:
        await link.close()


async def _resume_remote(target: RemoteTarget, config_path: str | None) -> None:
    from eq_tui.cli.remote.link import open_link
    from eq_tui.cli.remote.start import resume

    link = await open_link(target.host, config_path, read_from=str(target))
    try:
        await resume(link, await link.locate(target), config_path)
    finally:
        await link.close()


# ---- entry ---------------------------------------------------------------------------------

def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def attach(where: str, *, theme: str | None = None, resume: bool = False,
           config_path: str | None = None) -> int:
    from eq_tui.cli.run_dirs import resolve

    target = parse_target(where)
    if target is None:
        where = str(resolve(where))

    def once() -> int:
        if target is not None:
            return asyncio.run(_attach_remote(target, theme, config_path, resume))
        return asyncio.run(_attach_local(Path(where), theme, config_path, resume))

    try:
        return once()
    except EngineNotRunning as exc:
        if not resume:
            print(f"eq-tui: {exc}", file=sys.stderr)
            if not _ask(exc.question):
                return exc.exit_code
        exc.start()
        print("eq-tui: the engine is running; attaching", file=sys.stderr)
    return once()


def parser(verb: str = "attach") -> argparse.ArgumentParser:
    parser = new_parser(verb, "The UI on an engine that is already running.")
    add_run_dir(parser)
    add_ssh_config(parser)
    parser.add_argument("--theme", metavar="NAME", help="UI theme")
    parser.add_argument("--resume", action="store_true",
                        help="if no engine is running there, start it in the background first "
                             "(from the manifest its run dir records); if one is, hand it the "
                             "secrets it lacks from this environment")
    return parser


def run(verb: str, argv: list[str]) -> int:
    options = parser(verb).parse_args(argv)
    return attach(options.run_dir, theme=options.theme, resume=options.resume,
                  config_path=ssh_config_path(options.ssh_config))
