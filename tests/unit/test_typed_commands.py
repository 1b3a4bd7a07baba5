"""One typed command per verb (eq_tui/api/commands.py): what the shell verbs, the UI and the
engine's dispatch share, and its form on the wire."""

from __future__ import annotations

import pytest

from eq_tui.api.client import COMMANDS
from eq_tui.api.commands import (
    KINDS,
    Add,
    Clone,
    CommandError,
    Edit,
    Kill,
    OnJobs,
    Pause,
    Release,
    ReleaseGpu,
    Reload,
    SetPriority,
    from_wire,
)
from eq_tui.cli.queue_verb_names import VERBS

EXAMPLES = [
    Kill(("a", "b"), by="me"), SetPriority(("a",), delta=-1), SetPriority(("a",), priority=5),
    Edit(("a",), cmd="python t.py", by="ui"), Edit(("a", "b"), sets={"lr": "3", "fast": True}),
    Clone(job="a", new_id="a2", cmd="x", priority=2), Clone(job="a"),
    Add(id="n", cmd="t", phase="p", gpus_per_job=0, mem_mib="auto", exclusive=True, priority=1),
    Reload(dry_run=True), Reload(), Pause(by="ui"), ReleaseGpu(gpus=("box:1",)),
    Release(phase="main"), Release(("a",)),
]


def test_every_verb_and_every_command_name_has_its_type() -> None:
    assert set(VERBS) <= set(KINDS)
    assert set(COMMANDS) == set(KINDS)
    assert all(kind.name == name for name, kind in KINDS.items())


@pytest.mark.parametrize("command", EXAMPLES, ids=lambda c: f"{c.name}")
def test_a_command_is_the_same_after_the_wire(command: object) -> None:
    assert isinstance(command, OnJobs | Clone | Add | Reload | Pause | ReleaseGpu)
    name, targets, arguments = command.wire()
    assert from_wire(name, targets, arguments) == command


def test_the_wire_keeps_its_names_and_leaves_out_what_was_not_given() -> None:
    assert Edit(("a",), sets={"lr": "3"}).wire() == ("edit", ["a"], {"set": {"lr": "3"}})
    assert Clone(job="a", new_id="b").wire() == ("clone", ["a"], {"id": "b"})
    assert Kill(("a",), by="ui").wire() == ("kill", ["a"], {"by": "ui"})
    assert Reload().wire() == ("reload", [], {"dry_run": False, "force": False})


@pytest.mark.parametrize(("name", "targets", "args", "why"), [
    ("frobnicate", [], {}, "unknown command 'frobnicate'"),
    ("kill", [1], {}, "ids must be strings"),
    ("edit", ["a"], {"colour": "red"}, "edit takes no argument 'colour'"),
    ("edit", ["a"], {"set": ["lr=3"]}, "'set' must map keys to values"),
    ("clone", ["a", "b"], {}, "clone takes one job id"),
    ("pause", ["a"], {}, "pause takes no ids"),
])
def test_what_is_no_command_is_refused_with_why(name: str, targets: list[object],
                                                args: dict[str, object], why: str) -> None:
    with pytest.raises(CommandError, match=why):
        from_wire(name, targets, args)
