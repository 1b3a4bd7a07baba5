"""Sending one message to one target: a command (run where the engine runs, the message as
JSON on stdin) or an HTTP POST of JSON (urllib, in a thread). Both answer None when the target
took it, else what went wrong."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import urllib.error
import urllib.request
from typing import Any

from eq_tui.manifest.model import NotifySpec

SEND_TIMEOUT_S = 15.0


def target_key(spec: NotifySpec) -> str:
    """A target's name in the outbox: the same across restarts while its entry is unchanged."""
    text = json.dumps([spec.on, spec.command, spec.url, spec.url_env])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


async def send(spec: NotifySpec, message: dict[str, Any]) -> str | None:
    body = json.dumps(message).encode()
    if spec.command is not None:
        return await _run_command(spec.command, body)
    url = spec.url
    if spec.url_env is not None:
        url = os.environ.get(spec.url_env)
        if not url:
            return f"environment variable {spec.url_env} is not set"
    assert url is not None
    return await asyncio.to_thread(_post, url, body)


async def _run_command(command: str, body: bytes) -> str | None:
    try:
        proc = await asyncio.create_subprocess_shell(
            command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE)
    except OSError as exc:
        return f"could not start: {exc}"
    try:
        _out, err = await asyncio.wait_for(proc.communicate(body), SEND_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return f"timed out after {SEND_TIMEOUT_S:g} s"
    if proc.returncode != 0:
        return f"exited {proc.returncode}: {err.decode(errors='replace').strip()[:200]}"
    return None


def _post(url: str, body: bytes) -> str | None:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=SEND_TIMEOUT_S) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        # never the URL itself in a message: it may carry a token
        reason = getattr(exc, "reason", exc)
        return f"could not reach the URL: {reason}"
    return None if 200 <= status < 300 else f"HTTP {status}"
