"""Every command the README shows runs as written (issue 43, item 5). Its ```sh blocks are run
line by line, each block in a folder of its own (with `sample_manifests/` and stand-ins for the
reader's `train.log` and `sweep.yaml`): what needs no host and launches nothing really runs and
exits 0 (`--version`, `init`, `--dry-run` on simulated hosts, `explain-log`, `completion`,
`schema`); the rest — a run, `--detach`, `status`, the shell verbs — goes through the real
parsers and checks of eq_tui.cli, with no usage error, and names a manifest or run dir that is
there. The command-line summaries (README.md, docs/commands.md) name only verbs and options the
parsers have, every verb, and every option of the main command."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from eq_tui.cli import main, queue_verbs, run
from eq_tui.cli.queue_verb_names import VERBS as QUEUE_VERBS
from eq_tui.manifest.loader import load_manifest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
EQ = [sys.executable, "-m", "eq_tui"]
RUNS = {"completion", "schema", "init", "explain-log"}  # need no host, launch nothing
# the reader's own files that README commands name, as a sweep of fake-train writes them
STAND_INS = {
    "train.log": "epoch 1/2 loss=0.52 val_acc=0.61\nepoch 2/2 loss=0.41 val_acc=0.68\n",
    "sweep.yaml": ("project: sweep\nhosts: [{name: sim, simulate: {gpus: 2}}]\n"
                   "goal: {val_acc: max}\ngrid: {seed: [1, 2]}\n"
                   "template: {cmd: 'fake-train --seed ${seed} --epochs 2'}\n"),
}


@dataclass(frozen=True)
class Line:
    block: int
    text: str


def lines() -> list[Line]:
    """The README's ```sh and ```console lines, continuations joined, `$ ` prompts cut."""
    found: list[Line] = []
    for n, block in enumerate(re.findall(r"^```(?:sh|console)\n(.*?)^```", README,
                                         re.MULTILINE | re.DOTALL)):
        for text in block.replace("\\\n", " ").splitlines():
            found.append(Line(n, text.removeprefix("$ ").strip()))
    return found


def eq_words(text: str) -> list[str] | None:
    """The arguments of an `eq-tui` line (after any VAR=value, before a redirect or pipe)."""
    words = shlex.split(text, comments=True)
    while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
        words = words[1:]
    if not words or words[0] not in ("eq-tui", ".venv/bin/eq-tui"):
        return None
    cut = next((i for i, w in enumerate(words) if w in (">", ">>", "|", "&&", ";")), len(words))
    return words[1:cut]


def only_simulated(manifest: Path) -> bool:
    return all(host.kind == "sim" for host in load_manifest(manifest).hosts)


def names_a_run(arg: str, cwd: Path) -> bool:
    """A run dir, a manifest or a folder that is there; HOST:RUN_DIR; or the default run dir
    of a manifest beside its experiment_queue/ (a run the block's own commands make)."""
    path = cwd / arg
    if path.exists() or re.match(r"[\w.@-]+:", arg):
        return True
    return path.parent.name == "experiment_queue" and any(
        load_manifest(m).project == path.name for m in path.parent.parent.glob("*.yaml"))


def runs_for_real(words: list[str], cwd: Path) -> bool:
    if not words or {"--help", "-h", "--version"} & set(words) or words[0] in RUNS:
        return True
    if "--dry-run" in words and words[0] not in main.VERBS:
        manifests = [cwd / w for w in words if not w.startswith("-")]
        return all(m.is_file() and only_simulated(m) for m in manifests)
    return False


def check_parsed(words: list[str], cwd: Path) -> None:
    """What `eq-tui WORDS` does before it runs anything: its parser and its checks."""
    verb = words[0] if words[0] in main.VERBS else ""
    if verb in QUEUE_VERBS:
        request = queue_verbs.parse_verb(verb, words[1:])
        assert names_a_run(request.where, cwd), words
    elif verb:
        options = main.VERBS[verb].parser(verb).parse_args(words[1:])
        for name in ("run_dir", "manifest"):
            if getattr(options, name, None):
                assert names_a_run(getattr(options, name), cwd), words
    else:
        assert main.unknown_verb(words[0]) is None, words
        options = run.parser("").parse_args(words)
        run._check_options(options)
        assert all((cwd / m).is_file() for m in options.manifests), words


def test_every_command_the_readme_shows_runs_as_written(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    cwd, block, seen = tmp_path, -1, 0
    for line in lines():
        if line.block != block:
            block, cwd = line.block, tmp_path / f"block{line.block}"
            cwd.mkdir()
            (cwd / "sample_manifests").symlink_to(ROOT / "sample_manifests")
            for name, text in STAND_INS.items():
                (cwd / name).write_text(text)
        words = eq_words(line.text)
        if words is None:
            first = shlex.split(line.text, comments=True)[:2]
            if first and first[0].startswith(".ci/"):
                assert os.access(ROOT / first[0], os.X_OK), line.text
            continue
        seen += 1
        monkeypatch.chdir(cwd)
        if runs_for_real(words, cwd):
            done = subprocess.run([*EQ, *words], cwd=cwd, env=env, capture_output=True,
                                  text=True, timeout=120, stdin=subprocess.DEVNULL)
            assert done.returncode == 0, (line.text, done.stdout[-1500:], done.stderr)
        else:
            check_parsed(words, cwd)
    assert seen >= 15


def summaries(text: str) -> str:
    """The ```text blocks that list commands (lines starting `eq-tui `), joined."""
    blocks = re.findall(r"^```text\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    return "".join(b for b in blocks if re.search(r"^eq-tui ", b, re.MULTILINE))


@pytest.mark.parametrize("doc", ["README.md", "docs/commands.md"])
def test_the_command_line_summary_is_what_the_parsers_take(doc: str) -> None:
    """Every verb it names is one, every option it gives a verb (or an option line under it)
    is that verb's, and it lists every verb and every option of the main command."""
    parsers = main.parsers()
    options = {name: set(parser._option_string_actions) for name, parser in parsers.items()}
    listed: set[str] = set()
    main_listed: set[str] = set()
    verbs: list[str] = []
    for line in summaries((ROOT / doc).read_text(encoding="utf-8")).splitlines():
        if line.startswith("eq-tui "):
            command = re.split(r"\s{2,}", line)[0].split()
            word = command[1]
            verbs = [""] if word.isupper() or word.startswith("[") else word.split("|")
            assert all(v in parsers for v in verbs), line
            listed.update(verbs)
            named = re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", " ".join(command[2:]))
        else:
            named = re.findall(r"(?<![\w-])(--[a-z][\w-]*)", line)
        for verb in verbs:
            missing = set(named) - options[verb]
            assert not missing, f"eq-tui {verb or 'MANIFEST'}: {missing} ({line.strip()})"
        if verbs == [""]:
            main_listed.update(named)
    assert listed == set(parsers), set(parsers) - listed
    shown = {o for o, action in parsers[""]._option_string_actions.items()
             if o.startswith("--") and action.help != argparse.SUPPRESS}
    assert shown - {"--help", "--version"} <= main_listed, shown - main_listed
