"""HOST:RUN_DIR on the command line, told apart from local paths; the commands printed for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from eq_tui.cli.main import main
from eq_tui.cli.remote.target import RemoteTarget, command_line, parse_target


@pytest.mark.parametrize(("text", "expected"), [
    ("gpu1:/home/me/.eq-tui/runs/p/run", RemoteTarget("gpu1", "/home/me/.eq-tui/runs/p/run")),
    ("gpu1:runs/p", RemoteTarget("gpu1", "runs/p")),
    ("gpu1:~/.eq-tui/runs/p/run", RemoteTarget("gpu1", "~/.eq-tui/runs/p/run")),
    ("me@10.0.0.7:/r", RemoteTarget("me@10.0.0.7", "/r")),
    ("me@10.0.0.7:2222:/r", RemoteTarget("me@10.0.0.7:2222", "/r")),
    ("box:7", RemoteTarget("box", "7")),
    ("./a:b", None),
    ("runs/x:y", None),
    ("/tmp", None),
    ("gpu1:", None),
    ("plain", None),
])
def test_parse_target(text: str, expected: RemoteTarget | None) -> None:
    assert parse_target(text) == expected


def test_an_existing_local_path_with_a_colon_is_local(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "box:run").mkdir()
    assert parse_target("box:run") is None
    assert parse_target("box:other") == RemoteTarget("box", "other")


def test_printed_commands_are_quoted_and_carry_the_ssh_config() -> None:
    assert command_line("attach", "gpu:/r x") == "eq-tui attach 'gpu:/r x'"
    assert command_line("stop", "gpu:/r", "/c f") == "eq-tui stop gpu:/r --ssh-config '/c f'"


def test_on_needs_detach_and_a_host_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("project: p\nhosts: [{name: sim, simulate: {gpus: 1}}]\n"
                        "jobs: [{id: a, cmd: 'true'}]\n")
    assert main([str(manifest), "--on", "gpu"]) == 2
    assert "use it with --detach" in capsys.readouterr().err
    assert main([str(manifest), "--detach", "--on", "a b"]) == 2
    assert "ssh alias" in capsys.readouterr().err


def test_a_manifest_problem_is_found_here_before_any_host_is_contacted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("project: p\njobs:\n  - {id: a, cmd: x}\n  - {id: a, cmd: y}\n")
    assert main([str(manifest), "--detach", "--on", "no-such-host.invalid"]) == 2
    err = capsys.readouterr().err
    assert "m.yaml:4" in err and "duplicate job id" in err
