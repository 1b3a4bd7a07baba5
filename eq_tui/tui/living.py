"""The UI's actions for a living queue (their keys are in keys.py): `+`/`-` priority, `h`
hold/release, `e` edit, `c` clone, `a` add, and reloading the manifest from the palette. A mixin
of the app: every action works on the marked rows (else the cursor's) and goes out through the
app's `send`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eq_tui.api.commands import (
    Add,
    Clone,
    Command,
    Edit,
    Hold,
    OnJobs,
    Release,
    Reload,
    Requeue,
    Retry,
    SetPriority,
)
from eq_tui.tui.command_targets import targets
from eq_tui.tui.rows import split_row_key
from eq_tui.tui.screens.confirm import ConfirmScreen
from eq_tui.tui.screens.job_form import JobFormScreen

MANIFEST_CHECK_S = 2.0


def reload_message(detail: dict[str, Any]) -> str:
    lines = []
    for key, label in (("add", "add"), ("update", "update"), ("retire", "retire")):
        names = detail.get(key) or []
        if names:
            lines.append(f"{label}: {', '.join(names[:12])}"
                         + (f" and {len(names) - 12} more" if len(names) > 12 else ""))
    kept = detail.get("kept") or {}
    if kept:
        lines.append(f"left alone (running or finished): {len(kept)}")
    for job_id, what in list((detail.get("by_person") or {}).items())[:12]:
        lines.append(f"not applied to {job_id}, a person changed it: {what}")
    if detail.get("by_person"):
        lines.append("(`eq-tui reload RUN_DIR --force` applies the file's over them)")
    for phase, text in (detail.get("early_stop") or {}).items():
        lines.append(f"early_stop of phase {phase}: {text}")
    if detail.get("not_applied"):
        lines.append("needs a restart: " + ", ".join(detail["not_applied"]))
    return "\n".join(lines) or "the file changes no job"


def manifest_source(run_dir: str) -> Path | None:
    """The manifest file a run dir's engine was started from (its manifest.json says)."""
    try:
        source = json.loads((Path(run_dir) / "manifest.json").read_text())["source"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Path(source) if isinstance(source, str) and source else None


def mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


JOB_COMMANDS: dict[str, type[OnJobs]] = {"retry": Retry, "requeue": Requeue}
STOPPED_BY_REQUEUE = frozenset({"running", "launching"})  # their session is stopped: `u` asks


class LivingQueueActions:
    """Mixed into EqTuiApp (its methods are typed against it)."""

    _manifest_seen: dict[str, tuple[Path, float | None]]

    def on_mount(self) -> None:
        """(Textual calls this beside the app's own on_mount.) Watch the manifest files of the
        engines that run on this machine, and offer a reload when one changes."""
        self._manifest_seen = {}
        self._app().set_interval(MANIFEST_CHECK_S, self.check_manifests)

    def check_manifests(self) -> None:
        app = self._app()
        for project, view in app.view.projects.items():
            seen = self._manifest_seen.get(project)
            if seen is None:
                source = manifest_source(view.run_dir) if view.run_dir else None
                if source is not None:
                    self._manifest_seen[project] = (source, mtime(source))
                continue
            source, before = seen
            now = mtime(source)
            if now is not None and now != before:
                self._manifest_seen[project] = (source, now)
                app.notify(f"{source.name} changed on disk: ctrl+p → Reload the manifest "
                           "shows what would change, then asks", title=f"{project}",
                           timeout=30)

    def _app(self) -> Any:
        """The app this mixin is part of (typed loosely: the UI's modules never import the
        app, which imports them)."""
        return self

    def _job(self, key: str) -> dict[str, Any] | None:
        found = self._app().view.job(key)
        return dict(found[1]) if found else None

    def run_command(self, name: str, keys: list[str]) -> None:
        """k/r/u on these jobs; the kill dialog leaves finished ones out; `u` asks first
        where it would stop a running job."""
        sender = self._app().sender
        if name == "requeue" and any((self._job(k) or {}).get("status") in STOPPED_BY_REQUEUE
                                     for k in keys):
            sender.request_requeue(keys)
        elif name != "kill":
            sender.send_soon(JOB_COMMANDS[name], keys)
        elif not keys or (keys := self.killable(keys)):
            sender.request_kill(keys)

    def killable(self, keys: list[str]) -> list[str]:
        """The kill dialog offers only jobs that have not finished."""
        finished = ("completed", "pruned", "stuck", "killed", "blocked")
        left = [k for k in keys if (self._job(k) or {}).get("status") not in finished]
        if len(left) < len(keys):
            skipped = len(keys) - len(left)
            self._app().notify(f"{skipped} finished job{'s' if skipped > 1 else ''} left out: "
                               "nothing to kill" if not left else
                               f"{skipped} finished job(s) left out of the kill",
                               severity="warning")
        return left

    def action_priority(self, delta: int) -> None:
        app = self._app()
        keys = targets(app)
        if keys:
            app.run_worker(app.sender.send(lambda ids: SetPriority(ids, delta=delta, by="ui"),
                                           keys), group="commands", exit_on_error=False)

    def action_hold(self) -> None:
        app = self._app()
        keys = targets(app)
        held = [k for k in keys if (self._job(k) or {}).get("status") == "held"]
        app.sender.send_soon(Release if keys and len(held) == len(keys) else Hold, keys)

    def _one_target(self, verb: str) -> tuple[list[str], dict[str, Any]] | None:
        """The one job edit or clone acts on (with a word to the person when there is not
        exactly one)."""
        keys = targets(self._app())
        job = self._job(keys[0]) if len(keys) == 1 else None
        if job is None:
            self._app().notify(f"select one job to {verb}", severity="warning")
            return None
        return keys, job

    def action_edit(self) -> None:
        app = self._app()
        if (target := self._one_target("edit")) is None:
            return
        keys, job = target
        if job.get("status") in ("launching", "running"):
            app.notify(f"{job['id']} is {job['status']}: kill or requeue it first, or clone "
                       "it (c)", severity="warning")
            return
        note = " (finished: it runs again)" if job.get("status") in (
            "completed", "pruned", "stuck", "killed", "blocked") else ""

        def answered(values: dict[str, str] | None) -> None:
            if values is not None and values["cmd"] != job.get("cmd"):
                cmd = values["cmd"]
                app.run_worker(app.sender.send(lambda ids: Edit(ids, cmd=cmd, by="ui"), keys),
                               group="commands", exit_on_error=False)

        app.push_screen(JobFormScreen(f"Edit {job['id']}{note}", cmd=str(job.get("cmd", ""))),
                        answered)

    def action_clone(self) -> None:
        app = self._app()
        if (target := self._one_target("clone")) is None:
            return
        keys, job = target

        def answered(values: dict[str, str] | None) -> None:
            if values is not None:
                new_id, cmd = values["id"], values["cmd"]
                app.run_worker(app.sender.send(
                    lambda ids: Clone(job=ids[0], new_id=new_id, cmd=cmd, by="ui"), keys),
                    group="commands", exit_on_error=False)

        app.push_screen(JobFormScreen(f"Clone {job['id']}", cmd=str(job.get("cmd", "")),
                                      new_id=f"{job['id']}-clone", confirm_label="Clone"),
                        answered)

    def action_add(self) -> None:
        app = self._app()
        key = app.table.cursor_key
        project = split_row_key(key)[0] if key else next(iter(app.view.projects), "")
        view = app.view.projects.get(project)
        if view is None:
            return
        phases = list(dict.fromkeys(str(job.get("phase")) for job in view.jobs.values()))

        def answered(values: dict[str, str] | None) -> None:
            if values is not None:
                app.run_worker(self._send_add(project, values), group="commands",
                               exit_on_error=False)

        app.push_screen(JobFormScreen(f"Add a job to {project}", new_id="", phases=phases,
                                      confirm_label="Add"), answered)

    async def _answered(self, client: Any, command: Command, *, failed: str,
                        refused: str) -> dict[str, Any] | None:
        """Send one command with no job ids; a failure or a refusal ends as a notification
        (`failed` / `refused` lead it). The answer when the command was done."""
        app = self._app()
        try:
            result: dict[str, Any] = await client.send(command)
        except Exception as exc:
            app.notify(f"{failed} failed: {exc}", severity="error")
            return None
        if not result.get("ok"):
            app.notify(f"{refused}: {result.get('error')}", severity="warning")
            return None
        return result

    async def _send_add(self, project: str, values: dict[str, str]) -> None:
        client = self._app().clients[project]
        command = Add(id=values.get("id"), cmd=values.get("cmd"), phase=values.get("phase"),
                      by="ui")
        if await self._answered(client, command, failed="add", refused="add") is not None:
            self._app().notify(f"added {values['id']}")

    def action_reload(self) -> None:
        """Every project's manifest file read again: the plan first, then, if confirmed, done."""
        app = self._app()
        app.run_worker(self._reload(), group="commands", exit_on_error=False)

    async def _reload(self) -> None:
        app = self._app()
        for project, client in app.clients.items():
            try:
                plan = await client.send(Reload(dry_run=True, by="ui"))
            except Exception as exc:
                app.notify(f"{project}: reload failed: {exc}", severity="error")
                continue
            if not plan.get("ok"):
                app.notify(f"{project}: {plan.get('error')}", severity="warning")
                continue

            def answered(yes: bool | None, client: Any = client, project: str = project) -> None:
                if yes:
                    app.run_worker(self._apply_reload(project, client), group="commands",
                                   exit_on_error=False)

            app.push_screen(ConfirmScreen(f"Reload the manifest of {project}?",
                                          reload_message(plan.get("detail") or {}),
                                          confirm_label="Reload"), answered)

    async def _apply_reload(self, project: str, client: Any) -> None:
        result = await self._answered(client, Reload(by="ui"),
                                      failed=f"{project}: reload", refused=project)
        if result is not None:
            self._app().notify(
                f"{project}: reloaded\n{reload_message(result.get('detail') or {})}")
