"""`mem_mib` is checked in one place (manifest/sharing.py `mem_mib_value`): the manifest, a job
added or cloned at run time (its command's args, as the control socket hands them over), the
CLI's `add --mem` and the state file accept and refuse the same values."""

from __future__ import annotations

import json
from typing import Any

import pytest

from eq_tui.cli.queue_verbs import _mem_mib
from eq_tui.engine.state.job_specs import sharing_args
from eq_tui.errors import ManifestError, UsageError
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.sharing import mem_mib_value

VALUES: list[Any] = [1, 18000, 0, -5, "auto", "AUTO", "Auto", "18000", "18GB", True, False, 1.5,
                     None, [1], {"a": 1}, ""]


def by_manifest(value: Any) -> object:
    text = f"mem_mib: {json.dumps(value)}\njobs: [{{id: a, cmd: x}}]\n"
    try:
        manifest = load_manifest_text(text, "m.yaml")
    except ManifestError:
        return "refused"
    return manifest.jobs[0].mem_mib


def by_command(value: Any) -> object:
    answer = sharing_args({"mem_mib": value}, 1, None, False)
    return "refused" if isinstance(answer, str) else answer[0]


def by_state_file(value: Any) -> object:
    checked = mem_mib_value(value)
    return "refused" if checked is None else checked


@pytest.mark.parametrize("value", [v for v in VALUES if v is not None])
def test_the_manifest_a_command_and_the_state_file_agree(value: Any) -> None:
    assert by_manifest(value) == by_command(value) == by_state_file(value)


@pytest.mark.parametrize("text", ["1", "18000", "0", "-5", "auto", "AUTO", "18GB", "1.5", "",
                                  "007"])
def test_the_cli_takes_what_a_command_takes(text: str) -> None:
    try:
        value: object = _mem_mib(text)
    except UsageError:
        value = "refused"
    as_yaml = int(text) if text.lstrip("-").isdigit() else text
    assert value == by_command(as_yaml)
