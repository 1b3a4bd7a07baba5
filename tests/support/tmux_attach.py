"""`eq-tui attach ...` run for real in a tmux pane of its own server, with an environment given
to that server (never on a command line), and its screen read back."""

from __future__ import annotations

import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], check=True, capture_output=True,
                          text=True).stdout


def wait_for_screen(socket: str, predicate: Callable[[str], bool],
                    timeout: float = 120.0) -> str:
    screen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = tmux(socket, "capture-pane", "-p")
        if predicate(screen):
            return screen
        time.sleep(0.2)
    raise AssertionError(f"screen never matched; last screen:\n{screen}")


def quit_ui(socket: str) -> str:
    """Quit the UI in the pane (q, then y) and return the screen once it says its EXIT=. An
    attached UI whose engine finished its queue meanwhile has closed by itself: its screen."""
    tmux(socket, "send-keys", "q")
    screen = wait_for_screen(socket, lambda s: "Quit (y)" in s or "EXIT=" in s)
    if "EXIT=" in screen:
        return screen
    tmux(socket, "send-keys", "y")
    return wait_for_screen(socket, lambda s: "EXIT=" in s)


@contextmanager
def eq_tui_in_tmux(args: list[str], env: dict[str, str]) -> Iterator[str]:
    """Runs `eq-tui ARGS` in a new tmux server started with `env` (the pane inherits it);
    the pane prints EXIT=<code> when it ends. Yields the server's socket name."""
    socket = f"eqsecret-{secrets.token_hex(3)}"
    command = (f"{shlex.quote(sys.executable)} -m eq_tui {shlex.join(args)}; "
               "echo EXIT=$?; sleep 120")
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-x", "200", "-y", "50",
                    command], check=True, capture_output=True, env=env)
    try:
        yield socket
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
