"""`eq-tui completion bash|zsh|fish`: shell completion generated from the argparse parsers
themselves (so a new flag completes without anyone touching this file): subcommands, each
command's flags, manifests, run dirs, themes, and the aliases of ~/.ssh/config for `--on`
and `HOST:RUN_DIR`.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import eq_tui
from eq_tui.cli.parsing import new_parser

SHELLS = ("bash", "zsh", "fish")
INSTALL = """\
Print shell completion for eq-tui: subcommands, flags, manifests, run dirs, themes, and the
ssh aliases of ~/.ssh/config for --on and HOST:RUN_DIR. Install it with one of:
  eq-tui completion bash > ~/.local/share/bash-completion/completions/eq-tui
  eq-tui completion zsh > ~/.zfunc/_eq-tui        (with ~/.zfunc on $fpath)
  eq-tui completion fish > ~/.config/fish/completions/eq-tui.fish"""
# What a value is, by argparse dest: how to complete it. Anything else is free text.
_KINDS = {"manifests": "manifest", "run_dir": "rundir", "ssh_config": "file", "output": "file",
          "logfile": "file",
          "on": "host", "hosts": "host", "theme": "theme", "shell": "choice"}
# Lists ssh aliases (Host lines without patterns) of ~/.ssh/config, one a line.
_HOSTS_AWK = ("awk 'tolower($1)==\"host\"{for(i=2;i<=NF;i++) if($i !~ /[*?!]/) print $i}' "
              "~/.ssh/config 2>/dev/null")


def parser(verb: str = "completion") -> argparse.ArgumentParser:
    parser = new_parser(verb, INSTALL)
    parser.add_argument("shell", choices=SHELLS, help="the shell to print completion for")
    return parser


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    kind: str | None  # None: a flag without a value; "text": a value we cannot guess
    choices: tuple[str, ...] = ()
    help: str = ""


@dataclass(frozen=True)
class Command:
    name: str  # "" for the main command (eq-tui MANIFEST ...)
    options: tuple[Option, ...]
    positional: str | None  # the kind of its positional argument
    choices: tuple[str, ...] = ()


def commands(parsers: Mapping[str, argparse.ArgumentParser]) -> list[Command]:
    """Each command's completion, from its parser ("" is the main command)."""
    return [_command(name, parser) for name, parser in parsers.items()]


def _command(name: str, parser: argparse.ArgumentParser) -> Command:
    options: list[Option] = []
    positional: str | None = None
    choices: tuple[str, ...] = ()
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        if not action.option_strings:
            if positional is None:  # the first one: RUN_DIR before the queue verbs' JOBs
                positional = _KINDS.get(action.dest, "text")
                choices = tuple(map(str, action.choices or ()))
            continue
        takes_value = action.nargs != 0
        kind = _KINDS.get(action.dest, "text") if takes_value else None
        if kind == "rundir":
            kind = "dir"  # --run-dir DIR: a directory, never HOST:RUN_DIR
        if action.choices:
            kind = "choice"
        help_text = (action.help or "").split(";")[0].split(" (")[0]
        options.append(Option(tuple(action.option_strings), kind,
                              tuple(map(str, action.choices or ())), help_text))
    return Command(name, tuple(options), positional, choices)


def theme_names() -> list[str]:
    """The bundled themes (the checkout's themes/ or the wheel's copy), without importing the
    UI."""
    package = Path(eq_tui.__file__).resolve().parent
    return sorted({path.stem for directory in (package.parent / "themes", package / "_themes")
                   if directory.is_dir() for path in directory.glob("*.toml")})


def run(verb: str, argv: list[str], parsers: Mapping[str, argparse.ArgumentParser]) -> int:
    """Print the script; `parsers` is every command's parser, handed over by the CLI's table
    (this module imports none of them)."""
    options = parser(verb).parse_args(argv)
    render = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[options.shell]
    print(render(commands(parsers), theme_names()), end="")
    return 0


# ---- bash (zsh runs it through bashcompinit) ------------------------------------------------

def _bash_values(kind: str | None, choices: tuple[str, ...], themes: list[str]) -> str:
    """The body of a case branch that fills COMPREPLY for a value of this kind."""
    if kind == "manifest":
        return '_eq_tui_files "$cur"'
    if kind == "rundir":
        return '_eq_tui_run_dirs "$cur"'
    if kind == "file":
        return 'COMPREPLY=($(compgen -f -- "$cur"))'
    if kind == "dir":
        return 'COMPREPLY=($(compgen -d -- "$cur"))'
    if kind == "host":
        return 'COMPREPLY=($(compgen -W "$(_eq_tui_hosts)" -- "$cur"))'
    if kind in ("theme", "choice"):
        words = themes if kind == "theme" else list(choices)
        return f'COMPREPLY=($(compgen -W {shlex.quote(" ".join(words))} -- "$cur"))'
    return "COMPREPLY=()"


def bash_script(cmds: list[Command], themes: list[str]) -> str:
    names = " ".join(c.name for c in cmds if c.name)
    value_cases: list[str] = []
    flag_cases: list[str] = []
    positional_cases: list[str] = []
    for cmd in cmds:
        key = cmd.name or "main"
        flags = " ".join(f for o in cmd.options for f in o.flags)
        flag_cases.append(f"        {key}) words={shlex.quote(flags)} ;;")
        for option in cmd.options:
            if option.kind is None:
                continue
            pattern = "|".join(f"{key}:{flag}" for flag in option.flags)
            value_cases.append(f"        {pattern}) "
                               f"{_bash_values(option.kind, option.choices, themes)}; return ;;")
        body = _bash_values(cmd.positional, cmd.choices, themes)
        positional_cases.append(f"        {key}) {body} ;;")
    return f"""\
# eq-tui completion for bash (generated by `eq-tui completion bash`)
_eq_tui_hosts() {{
    {_HOSTS_AWK}
}}
_eq_tui_files() {{
    COMPREPLY=($(compgen -d -- "$1") $(compgen -f -X '!*.yaml' -- "$1")
               $(compgen -f -X '!*.yml' -- "$1") $(compgen -f -X '!*.json' -- "$1"))
}}
_eq_tui_run_dirs() {{
    # run dirs here (directories), or HOST:RUN_DIR on an ssh host
    COMPREPLY=($(compgen -d -- "$1"))
    case $1 in
        */*|*:*) ;;
        *) COMPREPLY+=($(compgen -W "$(_eq_tui_hosts | sed 's/$/:/')" -- "$1")) ;;
    esac
}}
_eq_tui() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} cmd=main words
    case ${{COMP_WORDS[1]}} in
        {'|'.join(c.name for c in cmds if c.name)}) cmd=${{COMP_WORDS[1]}} ;;
    esac
    case $cmd:$prev in
{chr(10).join(value_cases)}
    esac
    if [[ $cur == -* ]]; then
        case $cmd in
{chr(10).join(flag_cases)}
        esac
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
        return
    fi
    if [[ $cmd == main && $COMP_CWORD -eq 1 ]]; then
        _eq_tui_files "$cur"
        COMPREPLY+=($(compgen -W {shlex.quote(names)} -- "$cur"))
        return
    fi
    case $cmd in
{chr(10).join(positional_cases)}
    esac
}}
complete -o filenames -o bashdefault -F _eq_tui eq-tui
"""


def zsh_script(cmds: list[Command], themes: list[str]) -> str:
    return ("#compdef eq-tui\n"
            "# eq-tui completion for zsh (generated by `eq-tui completion zsh`): the bash\n"
            "# completion through zsh's bashcompinit\n"
            "autoload -U +X bashcompinit && bashcompinit\n"
            + bash_script(cmds, themes).split("\n", 1)[1])


# ---- fish ------------------------------------------------------------------------------------

def _fish_values(kind: str | None, choices: tuple[str, ...], themes: list[str]) -> str:
    if kind == "manifest":
        return "-F"
    if kind == "file":
        return "-F"
    if kind in ("dir", "rundir"):
        return "-x -a '(__fish_complete_directories)'"
    if kind == "host":
        return f"-x -a '({_HOSTS_AWK.replace(chr(39), chr(92) + chr(39))})'"
    if kind in ("theme", "choice"):
        words = themes if kind == "theme" else list(choices)
        return f"-x -a {shlex.quote(' '.join(words))}"
    return "-x" if kind == "text" else ""


def fish_script(cmds: list[Command], themes: list[str]) -> str:
    names = [c.name for c in cmds if c.name]
    lines = ["# eq-tui completion for fish (generated by `eq-tui completion fish`)",
             "complete -c eq-tui -f",
             f"complete -c eq-tui -n '__fish_use_subcommand' -a {shlex.quote(' '.join(names))}",
             "complete -c eq-tui -n '__fish_use_subcommand' -F"]
    for cmd in cmds:
        condition = (f"__fish_seen_subcommand_from {cmd.name}" if cmd.name else
                     f"not __fish_seen_subcommand_from {' '.join(names)}")
        for option in cmd.options:
            parts = []
            for flag in option.flags:
                parts.append(f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}")
            values = _fish_values(option.kind, option.choices, themes)
            described = f" -d {shlex.quote(option.help)}" if option.help else ""
            lines.append(f"complete -c eq-tui -n {shlex.quote(condition)} {' '.join(parts)}"
                         f"{' ' + values if values else ''}{described}")
        if cmd.name and cmd.positional:
            values = _fish_values(cmd.positional, cmd.choices, themes)
            lines.append(f"complete -c eq-tui -n {shlex.quote(condition)} {values}")
    return "\n".join(lines) + "\n"
