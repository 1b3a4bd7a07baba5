"""One ssh target grammar for the manifest, the ssh runner, `--on HOST` and `HOST:RUN_DIR`."""

from __future__ import annotations

import json

import pytest

from eq_tui.cli.remote.start import ssh_command
from eq_tui.cli.remote.target import RemoteTarget, check_host, parse_target
from eq_tui.errors import HostError, ManifestError, UsageError
from eq_tui.hosts.ssh import SshRunner
from eq_tui.manifest import load_manifest_text
from eq_tui.manifest.ssh_target import SshTarget, parse_ssh_target

GOOD = [
    ("gpu1", SshTarget("gpu1")),
    ("me@10.0.0.7", SshTarget("10.0.0.7", user="me")),
    ("me@10.0.0.7:2222", SshTarget("10.0.0.7", user="me", port=2222)),
    ("box.lab:22", SshTarget("box.lab", port=22)),
]
BAD = ["", "a b", "me@", "@box", "a@b@c", "box:", "box:port", "runs/x", "me:pw@box", "box\n"]


@pytest.mark.parametrize(("text", "expected"), GOOD)
def test_the_accepted_forms(text: str, expected: SshTarget) -> None:
    assert parse_ssh_target(text) == expected


@pytest.mark.parametrize("text", BAD)
def test_anything_else_is_refused(text: str) -> None:
    assert parse_ssh_target(text) is None


@pytest.mark.parametrize("text", [t for t, _ in GOOD] + BAD)
def test_every_reader_agrees(text: str) -> None:
    accepted = parse_ssh_target(text) is not None
    try:
        load_manifest_text(f"project: p\nssh: {json.dumps(text)}\njobs: [{{id: a, cmd: x}}]\n",
                           "m.yaml")
        in_manifest = True
    except ManifestError:
        in_manifest = False
    try:
        SshRunner("h", text)
        in_runner = True
    except HostError:
        in_runner = False
    try:
        check_host(text)
        on_host = True
    except UsageError:
        on_host = False
    remote = parse_target(f"{text}:/runs/r")
    assert (in_manifest, in_runner, on_host) == (accepted, accepted, accepted)
    assert (remote == RemoteTarget(text, "/runs/r")) == accepted


def test_the_openssh_command_line_splits_the_port_off() -> None:
    assert ssh_command("me@box:2222", "/c") == ["ssh", "-F", "/c", "-p", "2222", "me@box"]
    assert ssh_command("alias", None) == ["ssh", "alias"]
