"""`eq-tui MANIFEST --detach --on HOST`: send each manifest to the host, start its engine there
in the background, check that it answers over SSH, and say how to attach, check and stop it."""

from __future__ import annotations

import asyncio
import posixpath
import shlex
from pathlib import Path

from eq_tui.cli.detach import FINISHED_MARK, RESUMING_MARK
from eq_tui.cli.remote.link import open_link
from eq_tui.cli.remote.start import (
    find_eq_tui,
    how_to_reach,
    manifest_copy,
    start_engine,
    upload_manifest,
)
from eq_tui.cli.remote.target import RemoteTarget
from eq_tui.errors import RunDirError
from eq_tui.manifest.secret_copy import ManifestCopy


async def _start_on_host(host: str, manifests: list[tuple[Path, str]], run_dir: str | None,
                         extra: list[str], config_path: str | None,
                         secrets: list[dict[str, str]], copies: list[ManifestCopy]) -> int:
    link = await open_link(host, config_path)
    codes = [0]
    try:
        eq_tui = await find_eq_tui(link, config_path)
        for (path, project), values, copy in zip(manifests, secrets, copies, strict=True):
            directory = await upload_manifest(link, path, copy.data, project)
            remote_run = run_dir or posixpath.join(directory, "run")
            started = await start_engine(link, eq_tui, posixpath.join(directory, path.name),
                                         remote_run, extra, {**values, **copy.values})
            if started.finished:
                codes.append(started.exit_code)
                print(f"{FINISHED_MARK} the run in {host}:{started.finished}: nothing to run "
                      f"for {path}\n  start over:  "
                      f"{shlex.join(['eq-tui', str(path), '--fresh', '--detach', '--on', host])}"
                      "   (archives the run dir first)", flush=True)
                continue
            if started.resuming:
                print(f"{RESUMING_MARK}{host}:{started.resuming}", flush=True)
            located = await link.locate(RemoteTarget(host, remote_run))
            client = await link.control(located)
            if client is None:
                raise RunDirError(f"{located}: the engine started but does not answer over "
                                  "ssh on its control socket")
            jobs = len(client.snapshot().get("jobs") or [])
            await client.close()
            target = RemoteTarget(host, located.path)
            commands = how_to_reach(target, config_path)
            print(f"eq-tui: engine for {path} is running on {host} ({jobs} jobs); "
                  f"run dir {target}\n"
                  f"  watch:  {commands['watch']}\n"
                  f"  status: {commands['status']}\n"
                  f"  stop:   {commands['stop']}   (jobs keep running; the next run resumes)\n"
                  f"  log:    {host}:{posixpath.join(located.path, 'engine.log')}", flush=True)
    finally:
        await link.close()
    return max(codes)


def start_on_host(host: str, manifests: list[tuple[Path, str]], *, run_dir: str | None,
                  poll: float | None, fresh: bool, config_path: str | None,
                  secrets: list[dict[str, str]] | None = None) -> int:
    """manifests: (local path, project) pairs, already validated here; secrets: per manifest,
    the from_env/from_file values read here, sent over the SSH channel to the engine there
    with those written in the manifest (its copy there holds none)."""
    extra = (["--poll", str(poll)] if poll is not None else []) + (["--fresh"] if fresh else [])
    handed = secrets if secrets is not None else [{} for _ in manifests]
    copies = [manifest_copy(path) for path, _ in manifests]  # refused here, before any host
    return asyncio.run(_start_on_host(host, manifests, run_dir, extra, config_path, handed,
                                      copies))
