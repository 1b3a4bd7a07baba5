"""`eq-tui kill|retry|requeue|hold|release|pause|resume|priority|edit|clone|add|reload|drain|
undrain [HOST:]RUN_DIR ...`: one command to the run's engine through its control socket (over SSH
for HOST:RUN_DIR), what it did printed (or its JSON answer), and an exit code: 0 done, 1 some
job could not be acted on, 2 bad usage, 3 no engine runs there and none could be started. A run
whose engine is not running gets one started in the background for the command (pause aside),
once the command's job ids and --set flags are checked against its state file (queue_check.py):
a typo never starts an engine.

A command carries an id; when the link drops before the answer comes, the same command is sent
again with the same id (the engine applies an id once), after a pause that grows."""

from __future__ import annotations

import asyncio
import getpass
import json
import socket
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from eq_tui.api.client import CommandResult
from eq_tui.api.commands import OnJobs, SetEarlyStop, SetSearch
from eq_tui.cli.queue_check import check_host, check_request, check_saved
from eq_tui.cli.queue_verbs import Request, parse_verb
from eq_tui.cli.remote.reach import NoEngine, reach
from eq_tui.errors import RunDirError
from eq_tui.present.job_filter import parse_filter

RESENDS = 4
FIRST_PAUSE_S = 0.5


def sender() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "?"
    return f"shell {user}@{socket.gethostname()}"


def filtered_jobs(snapshot: dict[str, Any], query: str) -> list[str]:
    chosen = parse_filter(query)
    project = str(snapshot.get("project", ""))
    return [str(job["id"]) for job in snapshot.get("jobs") or []
            if chosen.matches(job, project)]


async def send(request: Request) -> CommandResult:
    """The engine's answer; resent with the same id when the link drops on the way."""
    command_id = request.command_id or uuid.uuid4().hex
    request.command_id = command_id
    command = replace(request.command, by=sender())
    pause = FIRST_PAUSE_S
    for attempt in range(RESENDS + 1):
        try:
            async with reach(request.where, request.config_path) as client:
                known = client.snapshot().get("jobs")
                if request.jobs and known is not None:  # a typo is answered before sending
                    check_request(request, known)
                check_host(request, client.snapshot().get("hosts") or ())
                if request.filter is not None and isinstance(command, OnJobs):
                    jobs = list(command.job_ids)
                    matched = filtered_jobs(dict(client.snapshot()), request.filter)
                    if not matched and not jobs:
                        return {"ok": False, "results": {},
                                "error": f"no job matches {request.filter!r}"}
                    jobs += [job for job in matched if job not in jobs]
                    command = replace(command, job_ids=tuple(jobs))
                return await client.send(command, command_id)
        except (ConnectionError, NoEngine) as exc:
            # NoEngine after a first try: the engine may be restarting; it keeps the id
            if attempt == RESENDS or (isinstance(exc, NoEngine) and attempt == 0):
                if attempt:
                    raise RunDirError(f"{exc}; the command may or may not have arrived: "
                                      f"send it again with --command-id {command_id} "
                                      "(it is applied once)") from None
                raise
            await asyncio.sleep(pause)
            pause *= 2
    raise AssertionError("unreachable")


def describe(request: Request, answer: CommandResult) -> list[str]:
    lines = []
    detail = answer.get("detail") or {}
    verb = request.verb
    if verb == "reload":
        lines.extend(_reload_lines(detail))
    for job_id, outcome in answer.get("results", {}).items():
        lines.append(f"{verb} {job_id}: {'done' if outcome == 'ok' else outcome}")
    if detail.get("left_out"):
        lines.append(f"  not taken from phase {detail.get('phase')} (they need a grid "
                     f"variable): {', '.join(detail['left_out'])}")
    if isinstance(request.command, SetSearch) and answer.get("ok"):
        trials, hours = detail.get("trials"), detail.get("gpu_hours")
        amounts = " and ".join(([f"{trials} trials"] if trials is not None else [])
                               + ([f"{hours:g} GPU-hours"] if hours is not None else []))
        lines.append(f"the search of phase {detail.get('phase')} now asks up to {amounts} "
                     f"({detail.get('asked')} asked so far)")
    if isinstance(request.command, SetEarlyStop) and answer.get("ok"):
        lines.append("early stopping changed for the rest of the run (the reports so far stay; "
                     "the next ones are judged by the new setting)")
    if verb == "drain" and answer.get("ok"):
        stopped = detail.get("stopped") or []
        lines.append("nothing new launches there now" + (
            f"; stopped to resume elsewhere: {', '.join(stopped)}" if stopped else ""))
    if verb in ("pause", "resume") and answer.get("ok"):
        lines.append("launching paused" if verb == "pause" else "launching resumed")
    if answer.get("duplicate"):
        lines.append(f"(command {request.command_id} had arrived already: its first answer)")
    return lines


def _reload_lines(detail: dict[str, Any]) -> list[str]:
    would = "would " if detail.get("dry_run") else ""
    lines = [f"reload of {detail.get('source')}" + (" (dry run: nothing changed)" if would
                                                    else "")]
    for key, label in (("add", "add"), ("update", "update"), ("retire", "retire")):
        for job_id in detail.get(key) or []:
            lines.append(f"  {would}{label} {job_id}")
    for job_id, why in (detail.get("kept") or {}).items():
        lines.append(f"  leave {job_id}: {why}")
    for job_id, what in (detail.get("by_person") or {}).items():
        lines.append(f"  {would}not apply to {job_id}: {what}; --force applies the file's")
    for phase, text in (detail.get("early_stop") or {}).items():
        lines.append(f"  {would}set early_stop of phase {phase}: {text} (for the rest of the run)")
    for phase, text in (detail.get("early_stop_kept") or {}).items():
        lines.append(f"  {would}not set early_stop of phase {phase} to {text}: a person set it "
                     "(eq-tui edit --early-stop); --force applies the file's")
    if detail.get("not_applied"):
        lines.append("  not applied to the running engine (restart it to use them): "
                     + ", ".join(detail["not_applied"]))
    if not any(detail.get(k) for k in ("add", "update", "retire", "kept", "by_person")):
        lines.append("  no job changes")
    return lines


def run(verb: str, argv: list[str]) -> int:
    from eq_tui.cli.remote.target import parse_target
    from eq_tui.cli.run_dirs import resolve

    request = parse_verb(verb, argv)
    local = parse_target(request.where) is None
    if local:
        request.where = str(resolve(request.where))
    try:
        answer = asyncio.run(send(request))
    except NoEngine:
        if local:  # a typo is answered from the state file: no engine started to refuse it
            check_saved(request, Path(request.where))
        if verb == "pause":
            raise RunDirError(f"no engine is running for {request.where}: nothing launches "
                              "without one, so there is nothing to pause") from None
        if not request.start:
            raise
        if local:
            from eq_tui.cli.detach import start_for_command

            start_for_command(Path(request.where), verb, request.config_path)
        else:
            from eq_tui.cli.remote.start import start_for_command as start_there

            target = parse_target(request.where)
            assert target is not None
            asyncio.run(start_there(target, verb, request.config_path))
        answer = asyncio.run(send(request))
    if request.as_json:
        print(json.dumps({**answer, "command_id": request.command_id}, indent=1))
    else:
        for line in describe(request, answer):
            print(line)
    if not answer.get("ok"):
        if answer.get("error") and not request.as_json:
            print(f"eq-tui: {verb}: {answer['error']}", file=sys.stderr)
        return 1
    return 0
