"""Secrets from where they already live: `env: {NAME: {from_env: NAME}}` and `{from_file: PATH}`.

The loader only records where a secret comes from; `resolve` fills in the values this process
can see: first those handed over by whoever started it (the start pipe of a detached engine,
the SSH channel of a remote one), then its own environment, then the file. A secret that is
nowhere is not an error: the engine launches no job until it has it (`missing_secrets`, the
scheduler's waiting reason), so an engine restarted without it waits for `attach --resume`
to hand it over its control socket (`take_secrets`). Values travel only in memory and on
pipes: never in a file or on a command line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from eq_tui.errors import ManifestError, UsageError
from eq_tui.manifest.model import EnvVar, Manifest

SECRETS_STDIN_FLAG = "--secrets-stdin"  # the engine reads {NAME: value} as JSON on stdin


def missing_secrets(manifest: Manifest) -> list[str]:
    """The secrets the manifest reads from the environment or a file that this process lacks;
    while any is missing no job may launch (every job gets the manifest's env)."""
    return [name for name, var in manifest.env.items() if not var.provided]


def missing_reason(manifest: Manifest) -> str | None:
    """The waiting reason of every job while a secret is missing, else None."""
    missing = missing_secrets(manifest)
    if not missing:
        return None
    return "; ".join(f"secret {name} not provided" for name in missing)


def handed_over(manifest: Manifest) -> dict[str, str]:
    """The from_env/from_file values this process has: what it passes on to an engine it
    starts (over a pipe, never argv)."""
    return {name: var.value for name, var in manifest.env.items()
            if var.provided and (var.from_env or var.from_file)}


def inline_secrets(manifest: Manifest) -> list[str]:
    """Secrets written in the manifest itself (`value:` with `secret: true`)."""
    return [name for name, var in manifest.env.items()
            if var.secret and var.from_env is None and var.from_file is None]


def resolve(manifest: Manifest, provided: Mapping[str, str] | None = None,
            environ: Mapping[str, str] | None = None) -> Manifest:
    """The manifest with every from_env/from_file value this process can get filled in."""
    env = os.environ if environ is None else environ
    given = provided or {}
    resolved: dict[str, EnvVar] = {}
    for name, var in manifest.env.items():
        value: str | None = None
        if var.from_env is None and var.from_file is None:
            resolved[name] = var
            continue
        if name in given:
            value = given[name]
        elif var.from_env is not None:
            value = env.get(var.from_env)
        elif var.from_file is not None:
            value = read_secret_file(manifest.source, name, var,
                                     relative_to=str(Path(manifest.source).resolve().parent))
        resolved[name] = dataclasses.replace(var, value=value or "", provided=value is not None)
    return dataclasses.replace(manifest, env=resolved)


def secret_file_path(written: str, relative_to: str | None) -> str:
    """`~` is this user's home; a relative path is relative to `relative_to` (the manifest's
    directory), else to the current directory."""
    path = Path(written).expanduser()
    if not path.is_absolute() and relative_to is not None:
        path = Path(relative_to) / path
    return str(path)


def read_secret_file(source: str, name: str, var: EnvVar, *,
                     relative_to: str | None = None) -> str | None:
    """The file's text without its trailing newline; None when there is no such file. A file
    that others may read is refused: a secret there is not one."""
    assert var.from_file is not None
    path = secret_file_path(var.from_file, relative_to)
    key_path = f"env.{name}.from_file"
    try:
        with open(path, "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise ManifestError(
                    f"{path} holds a secret but others may read it (mode "
                    f"{stat.S_IMODE(mode):04o}); make it readable by you alone: chmod 600 "
                    f"{path}", path=source, line=var.line, key_path=key_path)
            data = handle.read()
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ManifestError(f"cannot read {path}: {exc}", path=source, line=var.line,
                            key_path=key_path) from None
    try:
        return data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ManifestError(f"{path} is not UTF-8 text", path=source, line=var.line,
                            key_path=key_path) from None


def values_here(env: object, source: str, *, relative_to: str | None = None,
                names: Collection[str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """The values this process has of the from_env/from_file secrets a run's manifest.json
    names in `env` (only `names` when given), and why each other one is not here. A from_file
    path is read as written: `~` is this user's home, a relative path is relative to
    `relative_to`, else to the current directory."""
    values: dict[str, str] = {}
    lacking: dict[str, str] = {}
    for name, entry in env.items() if isinstance(env, dict) else ():
        if not isinstance(entry, dict) or (names is not None and name not in names):
            continue
        if isinstance(entry.get("from_env"), str):
            value = os.environ.get(entry["from_env"])
            where = f"${entry['from_env']} is not set here"
        elif isinstance(entry.get("from_file"), str):
            var = EnvVar(value="", secret=True, from_file=entry["from_file"])
            value = read_secret_file(source, str(name), var, relative_to=relative_to)
            where = f"{secret_file_path(entry['from_file'], relative_to)} does not exist"
        else:
            continue
        if value is None:
            lacking[str(name)] = where
        else:
            values[str(name)] = value
    return values, lacking


def read_handed_over(stream: IO[str]) -> dict[str, str]:
    """{NAME: value} as JSON, from the pipe the starter writes and closes."""
    try:
        data = json.loads(stream.read() or "{}")
    except ValueError:
        raise UsageError(f"{SECRETS_STDIN_FLAG}: stdin is not a JSON object") from None
    if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise UsageError(f"{SECRETS_STDIN_FLAG}: stdin must map names to strings")
    return data


def hand_over_bytes(values: Mapping[str, str]) -> bytes:
    return json.dumps(dict(values)).encode()


def warnings(manifest: Manifest) -> list[str]:
    """What `--dry-run` and a start say about secrets."""
    out = [f"env.{name}: a secret written in the manifest (value:) goes wherever the file "
           f"goes (git, backups); read it with {{from_env: {name}}} or {{from_file: PATH}} "
           f"instead (--detach --on hands it over as ${name}, so a resume there needs "
           f"${name} set)"
           for name in inline_secrets(manifest)]
    out += [_missing_text(manifest, name) for name in missing_secrets(manifest)]
    return out


def _missing_text(manifest: Manifest, name: str) -> str:
    var = manifest.env[name]
    where = f"${var.from_env} is not set" if var.from_env else f"{var.from_file} does not exist"
    return (f"secret {name} not provided ({where}): no job launches until its engine has it "
            f"(`eq-tui attach RUN_DIR --resume` from an environment that has it hands it to "
            f"the running engine)")


@dataclass(frozen=True)
class Taken:
    """What an engine made of secrets handed to it while it runs."""

    manifest: Manifest                      # with the values it took
    given: list[str]
    refused: dict[str, str]                 # name -> why
    missing: list[str]                      # still lacking after this
    error: str | None = None


def take_secrets(manifest: Manifest, values: Mapping[str, str], project: str) -> Taken:
    """The manifest with the values of secrets it declares (from_env, from_file or `secret:
    true`) and still lacks; any other name, or a secret it has already, is refused, and the
    whole hand-over is refused when it was meant for another project."""
    if project != manifest.project:
        why = f"this engine runs project {manifest.project!r}, not {project!r}"
        return Taken(manifest, [], dict.fromkeys(values, why), missing_secrets(manifest),
                     error=f"{why}; nothing taken")
    env = dict(manifest.env)
    given: list[str] = []
    refused: dict[str, str] = {}
    for name, value in values.items():
        var = env.get(name)
        if var is None or not var.secret:
            refused[name] = f"project {manifest.project!r} declares no secret {name}"
        elif var.provided:
            refused[name] = ("already provided: the engine keeps the value it has (stop it "
                             "and resume it to change that)")
        else:
            env[name] = dataclasses.replace(var, value=value, provided=True)
            given.append(name)
    taken = dataclasses.replace(manifest, env=env)
    return Taken(taken, given, refused, missing_secrets(taken))


def load_for_run(manifests: list[Manifest], *, from_stdin: bool,
                 warn: bool) -> list[Manifest]:
    """The manifests of a run with their secrets resolved: those handed over on stdin (an
    engine started by --detach or --on), else this process's environment and files."""
    provided = read_handed_over(sys.stdin) if from_stdin else {}
    resolved = [resolve(manifest, provided) for manifest in manifests]
    for manifest in resolved if warn else ():
        for name in missing_secrets(manifest):
            print(f"eq-tui: warning: {manifest.source}: {_missing_text(manifest, name)}",
                  file=sys.stderr)
    return resolved
