"""`eq-tui init`: write a commented manifest to start from.

`--cmd "python train.py --lr {1e-3,3e-4} --seed {1..3}"` turns each brace list into a grid
variable named after the flag before it (`lr`, `seed`) and the command into the template
(`--lr ${lr} --seed ${seed}`); `--hosts box1,box2` lists ssh hosts (`local` is this machine,
`sim` or `sim:N` simulated GPUs). With no flags at a terminal it asks. The result is loaded
with the real loader before it is written, and an existing file is never overwritten.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import eq_tui
from eq_tui.cli.parsing import new_parser
from eq_tui.cli.ssh_aliases import ssh_aliases
from eq_tui.errors import ManifestError, UsageError
from eq_tui.manifest.expand import GRID_KEY, LAUNCH_TIME_VARS
from eq_tui.manifest.loader import load_manifest_text

DEFAULT_PATH = "eq-tui.yaml"
_BRACE = re.compile(r"(?<!\$)\{([^{}\s]*(?:,|\.\.)[^{}\s]*)\}")
_RANGE = re.compile(r"(-?\d+)\.\.(-?\d+)(?:\.\.(\d+))?")
_FLAG_BEFORE = re.compile(r"--?([A-Za-z][A-Za-z0-9_-]*)[= ]$")
_ID_SAFE = re.compile(r"[A-Za-z0-9_.-]+")
_SIM = re.compile(r"sim(?::(\d+))?")
# a brace list begun and not ended before a space or the end: `{1e-3,3e-4`, `{1, 2}`
_UNCLOSED = re.compile(r"(?<!\$)\{([^{}\s]*(?:,|\.\.)[^{}\s]*)(?=\s|$)")


def parser(verb: str = "init") -> argparse.ArgumentParser:
    parser = new_parser(verb, "Write a commented manifest to start from (asks at a terminal "
                                "when given no flags). Brace lists in the command become a "
                                "grid: {1e-3,3e-4} or {1..3}.")
    parser.add_argument("--cmd", help="the training command, e.g. \"python train.py --lr "
                                      "{1e-3,3e-4} --seed {1..3}\"")
    parser.add_argument("--hosts", help="comma-separated ssh aliases or [user@]host[:port]; "
                                        "'local' is this machine, 'sim' or 'sim:N' simulated "
                                        "GPUs (default: local)")
    parser.add_argument("--conda", metavar="ENV", help="conda env to activate for every job")
    parser.add_argument("--project", help="project name (default: the file's stem)")
    parser.add_argument("-o", "--output", metavar="PATH", default=DEFAULT_PATH,
                        help=f"where to write it (default: {DEFAULT_PATH}); never overwritten")
    return parser


@dataclass
class Grid:
    template: str  # the command with ${var} for every brace list
    variables: dict[str, list[str]] = field(default_factory=dict)


def split_braces(command: str) -> Grid:
    """`python t.py --lr {1e-3,3e-4} --seed {1..3}` -> template and grid variables."""
    grid = Grid("")
    pieces: list[str] = []
    last = 0
    for match in _BRACE.finditer(command):
        _refuse_unclosed(command[last:match.start()])
        pieces.append(_literal(command[last:match.start()]))
        name = _variable_name(command[:match.start()], grid.variables)
        grid.variables[name] = _values(match.group(1))
        pieces.append(f"${{{name}}}")
        last = match.end()
    _refuse_unclosed(command[last:])
    pieces.append(_literal(command[last:]))
    grid.template = "".join(pieces)
    return grid


def _refuse_unclosed(text: str) -> None:
    """A brace list with no `}` (or a space inside it) would be one literal job: refused."""
    found = _UNCLOSED.search(text)
    if found:
        raise UsageError(f"`{found.group(0)}`: a brace list without its closing `}}` (no spaces "
                         "inside one: {1e-3,3e-4}, {1..3})")


def _literal(text: str) -> str:
    """Text the loader must leave alone: `$$` and `${` are its syntax."""
    return text.replace("$$", "$$$$").replace("${", "$${")


def _variable_name(before: str, taken: dict[str, list[str]]) -> str:
    """Named after the flag just before the brace list (`--lr {..}`, `--lr={..}`), else v1,
    v2, ..."""
    flag = _FLAG_BEFORE.search(before)
    base = re.sub(r"\W", "_", flag.group(1)) if flag else "v"
    if not GRID_KEY.fullmatch(base) or base in LAUNCH_TIME_VARS:
        base = f"v_{base}"
    if flag and base not in taken:
        return base
    n = 1 if not flag else 2
    while f"{base}{n}" in taken:
        n += 1
    return f"{base}{n}"


def _values(body: str) -> list[str]:
    span = _RANGE.fullmatch(body)
    if span:
        start, stop, step = int(span.group(1)), int(span.group(2)), int(span.group(3) or 1)
        direction = 1 if stop >= start else -1
        return [str(v) for v in range(start, stop + direction, direction * max(step, 1))]
    values = body.split(",")
    if any(not v for v in values):
        raise UsageError(f"{{{body}}}: an empty value in a brace list")
    for value in values:
        if not _ID_SAFE.fullmatch(value):
            raise UsageError(f"{{{body}}}: {value!r} cannot name a job (use letters, digits, "
                             f"'_', '.', '-'); write the manifest's grid by hand for it")
    return values


def host_entries(hosts: list[str]) -> list[str]:
    entries: list[str] = []
    names: set[str] = set()
    for target in hosts:
        sim = _SIM.fullmatch(target)
        if target == "local":
            body = ""
        elif sim:
            body = f", simulate: {{gpus: {sim.group(1) or 4}}}"
        else:
            body = f", ssh: {json.dumps(target)}"
        host_part = target.rpartition("@")[2].split(":")[0] if not sim else "sim"
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", host_part).strip("-.") or "host"
        name, n = base, 2
        while name in names:
            name, n = f"{base}{n}", n + 1
        names.add(name)
        entries.append(f"  - {{name: {json.dumps(name)}{body}}}")
    return entries


def schema_hint() -> str:
    """The first line: where this eq-tui's schema file is, for the YAML language server."""
    package = Path(eq_tui.__file__).resolve().parent
    for candidate in (package / "_schema" / "manifest.schema.json",
                      package.parent / "docs" / "manifest.schema.json"):
        if candidate.is_file():
            return f"# yaml-language-server: $schema={candidate}\n"
    return ("# For completion in your editor: eq-tui schema > manifest.schema.json, then make\n"
            "# this line  # yaml-language-server: $schema=manifest.schema.json\n")


def render(command: str, hosts: list[str], conda: str | None, project: str | None) -> str:
    grid = split_braces(command.strip())
    out = [schema_hint(),
           "# Written by `eq-tui init`. Every key: docs/manifest.md in the eq-tui repository,\n"
           "# or `eq-tui schema`. Check it with `eq-tui THIS_FILE --dry-run`.\n"]
    if project:
        out.append(f"project: {json.dumps(project)}\n")
    out.append("# cwd: /path/to/your/code            # working directory of the jobs on the "
               "hosts\n")
    out.append(f"conda: {json.dumps(conda)}\n" if conda else
               "# conda: my-env                       # activated before each job\n")
    out.append("# env:                                # extra environment for every job\n"
               "#   WANDB_MODE: offline\n"
               "#   # API keys: read from your environment or an owner-only file, never "
               "written here\n"
               "#   WANDB_API_KEY: {from_env: WANDB_API_KEY}\n"
               "#   HF_TOKEN: {from_file: ~/.cache/huggingface/token}\n")
    if hosts:
        out.append("hosts:   # ssh aliases from ~/.ssh/config, or user@host:port\n")
        out.extend(line + "\n" for line in host_entries(hosts))
    else:
        out.append("# hosts: [{name: box1, ssh: box1, gpus: [0, 1, 2, 3]}]   # default: this "
                   "machine\n")
    out.append("# gpus: all                           # or [0, 1, 2, 3]: the GPUs jobs may use\n"
               "# max_parallel: 8                     # jobs at once per host\n"
               "# gpus_per_job: 1                     # 0: a CPU-only job\n"
               "# mem_mib: auto                       # peak MiB per GPU (or auto): jobs that "
               "fit share a GPU\n"
               "# launcher: screen                    # or tmux\n"
               "oom_retry: {delay: 120, max_attempts: 3}   # CUDA OOMs wait, then retry\n")
    out.append(goal_line(grid.template))
    if grid.variables:
        out.append("grid:   # one job per combination, the last variable varying fastest\n")
        out.extend(f"  {name}: [{', '.join(map(_yaml_value, values))}]\n"
                   for name, values in grid.variables.items())
        out.append("template:   # jobs are named from their grid point, e.g. "
                   f"{'_'.join(n + v[0] for n, v in grid.variables.items())}\n"
                   f"  cmd: {json.dumps(grid.template)}\n"
                   "  # output_check: \"out/${JOB_ID}.json\"   # completed only once this "
                   "exists\n")
    else:
        out.append("jobs:\n"
                   f"  - id: run1\n    cmd: {json.dumps(grid.template)}\n"
                   "    # output_check: \"out/${JOB_ID}.json\"   # completed only once this "
                   "exists\n")
    return "".join(out)


def goal_line(command: str) -> str:
    """Which way is better for a metric, so results mark each phase's best: known for eq-tui's
    own fake-train, a commented example for any other command."""
    if command.split(maxsplit=1)[:1] == ["fake-train"]:
        return "goal: {val_acc: max}                  # results mark each phase's best\n"
    return ("# goal: {val_acc: max, loss: min}      # which way is better: results mark "
            "each phase's best\n")


def _yaml_value(value: str) -> str:
    return value if re.fullmatch(r"-?[1-9][0-9]*|0", value) else json.dumps(value)


def _ask(question: str, default: str = "") -> str:
    try:
        answer = input(f"{question}{f' [{default}]' if default else ''}: ").strip()
    except EOFError:
        raise UsageError("init: no answer; give --cmd (and --hosts) instead") from None
    return answer or default


def _interview() -> tuple[str, list[str], str | None]:
    print("eq-tui init: a few questions (brace lists such as {1e-3,3e-4} or {1..3} in the "
          "command become a grid)")
    command = ""
    while not command:
        command = _ask("Command to run, e.g. python train.py --lr {1e-3,3e-4} --seed {1..3}")
    aliases = ssh_aliases()
    if aliases:
        print(f"ssh hosts in ~/.ssh/config: {', '.join(aliases)}")
    hosts = _ask("Hosts, comma-separated ('local' is this machine)", "local")
    conda = _ask("Conda env (empty for none)")
    return command, _host_list(hosts), conda or None


def _host_list(text: str | None) -> list[str]:
    hosts = [h.strip() for h in (text or "").split(",") if h.strip()]
    return [] if hosts == ["local"] else hosts


def run(verb: str, argv: list[str]) -> int:
    options = parser(verb).parse_args(argv)
    path = Path(options.output)
    if path.exists() or path.is_symlink():
        raise UsageError(f"{path} exists; eq-tui init never overwrites a file (choose another "
                         f"with -o PATH)")
    if options.cmd is None:
        if options.hosts is not None or options.conda is not None:
            raise UsageError("init: give --cmd too (or no flags, at a terminal)")
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError("init: give --cmd (and --hosts), or run it at a terminal "
                             "to be asked")
        command, hosts, conda = _interview()
    else:
        command, hosts, conda = options.cmd, _host_list(options.hosts), options.conda
    if not command.strip():
        raise UsageError("init: --cmd is empty")
    text = render(command, hosts, conda, options.project)
    try:
        manifest = load_manifest_text(text, str(path))
    except ManifestError as exc:
        raise UsageError(f"init: the manifest would not load: {exc}") from None
    try:
        with open(path, "x", encoding="utf-8") as out:  # "x": never over a file made meanwhile
            out.write(text)
    except FileExistsError:
        raise UsageError(f"{path} exists; eq-tui init never overwrites a file") from None
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc}") from None
    shown = os.fspath(path)
    print(f"eq-tui: wrote {shown}: {len(manifest.jobs)} job(s) on "
          f"{', '.join(h.name for h in manifest.hosts)}\n"
          f"  check:  eq-tui {shown} --dry-run\n"
          f"  run:    eq-tui {shown}")
    return 0
