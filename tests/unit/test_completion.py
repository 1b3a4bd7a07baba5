"""`eq-tui completion`: generated from the parsers, and bash's completion function really
completes subcommands, flags, manifests, run dirs, themes and ssh aliases."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from eq_tui.cli.completion import bash_script, commands, fish_script, theme_names, zsh_script
from eq_tui.cli.main import main, parsers

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@pytest.fixture
def script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["completion", "bash"]) == 0
    path = tmp_path / "eq-tui.bash"
    path.write_text(capsys.readouterr().out)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host gpu1 gpu2\n  User me\nHost *\n  Port 22\n"
                                          "host cluster-login\n")
    work = tmp_path / "work"
    (work / "experiment_queue" / "sweep").mkdir(parents=True)
    (work / "sweep.yaml").write_text("jobs: []\n")
    (work / "notes.txt").write_text("")
    return work


def complete(script: Path, work: Path, line: str) -> list[str]:
    """What bash's completion function offers for `line` (the cursor at its end)."""
    words = shlex.split(line) + ([""] if line.endswith(" ") else [])
    array = " ".join(shlex.quote(w) for w in words)
    program = (f"source {shlex.quote(str(script))}; COMP_WORDS=({array}); "
               f"COMP_CWORD={len(words) - 1}; _eq_tui; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], cwd=work,
                            capture_output=True, text=True, timeout=30,
                            env={"HOME": str(work.parent / "home"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    return sorted(filter(None, result.stdout.splitlines()))


@needs_bash
def test_bash_completes_subcommands_flags_files_dirs_hosts_and_themes(
        script: Path, project: Path) -> None:
    assert complete(script, project, "eq-tui st") == ["status", "stop"]
    assert complete(script, project, "eq-tui sw") == ["sweep.yaml"]  # manifests, not notes.txt
    assert "notes.txt" not in complete(script, project, "eq-tui ")
    assert complete(script, project, "eq-tui sweep.yaml --d") == ["--detach", "--dry-run"]
    assert complete(script, project, "eq-tui sweep.yaml --detach --on ") == [
        "cluster-login", "gpu1", "gpu2"]
    assert complete(script, project, "eq-tui sweep.yaml --theme eq-l") == ["eq-light"]
    assert complete(script, project, "eq-tui status exp") == ["experiment_queue"]
    assert complete(script, project, "eq-tui attach gp") == ["gpu1:", "gpu2:"]
    assert complete(script, project, "eq-tui attach --r") == ["--resume"]
    assert complete(script, project, "eq-tui completion ") == ["bash", "fish", "zsh"]
    assert complete(script, project, "eq-tui init --c") == ["--cmd", "--conda"]
    assert complete(script, project, "eq-tui sweep.yaml --poll ") == []
    assert complete(script, project, "eq-tui kill exp") == ["experiment_queue"]
    assert complete(script, project, "eq-tui results exp") == ["experiment_queue"]
    assert complete(script, project, "eq-tui edit --s") == ["--search", "--set", "--ssh-config"]


def test_every_flag_of_every_parser_is_in_every_script() -> None:
    cmds = commands(parsers())
    assert {c.name for c in cmds} == {
        "", "status", "attach", "stop", "schema", "explain-log", "init", "completion",
        "results", "notify-test", "kill", "retry", "requeue", "hold", "release", "pause", "resume",
        "priority", "edit", "clone", "add", "reload", "drain", "undrain"}
    themes = theme_names()
    assert {"eq-dark", "eq-light", "eq-ansi"} <= set(themes)
    scripts = [bash_script(cmds, themes), zsh_script(cmds, themes)]
    for cmd in cmds:
        for option in cmd.options:
            for flag in option.flags:
                assert all(flag in text for text in scripts), flag
                long = f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
                assert long in fish_script(cmds, themes), flag
    assert "--secrets-stdin" not in scripts[0]  # internal, hidden from --help and completion


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_each_script_parses_in_its_shell(shell: str, capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    assert main(["completion", shell]) == 0
    path = tmp_path / "completion"
    path.write_text(capsys.readouterr().out)
    check = ["fish", "--no-execute", str(path)] if shell == "fish" else [shell, "-n", str(path)]
    result = subprocess.run(check, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_fish_completes_subcommands_and_each_commands_flags(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["completion", "fish"]) == 0
    path = tmp_path / "eq-tui.fish"
    path.write_text(capsys.readouterr().out)

    def offered(line: str) -> list[str]:
        program = f"source {shlex.quote(str(path))}; complete -C {shlex.quote(line)}"
        result = subprocess.run(["fish", "--no-config", "-c", program],
                                capture_output=True, text=True, timeout=30,
                                env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
        assert result.returncode == 0, result.stderr
        return sorted(line.split("\t")[0] for line in result.stdout.splitlines())

    assert offered("eq-tui st") == ["status", "stop"]
    assert offered("eq-tui x.yaml --dr") == ["--dry-run"]
    assert offered("eq-tui status --") == ["--gpus", "--help", "--jobs", "--json", "--ssh-config"]


def test_zsh_loads_it_and_registers_eq_tui(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    assert main(["completion", "zsh"]) == 0
    path = tmp_path / "_eq-tui"
    path.write_text(capsys.readouterr().out)
    program = (f"autoload -U compinit && compinit -u -d {shlex.quote(str(tmp_path / 'dump'))}; "
               f"source {shlex.quote(str(path))} && print -r -- ${{_comps[eq-tui]}}")
    result = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True,
                            timeout=30, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "-F _eq_tui" in result.stdout
