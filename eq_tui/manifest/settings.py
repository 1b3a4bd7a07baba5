"""Top-level settings that are neither hosts nor jobs: project, env, oom_retry, crash_guard."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from eq_tui.manifest import schema
from eq_tui.manifest.model import CrashGuard, EnvVar, OomRetry
from eq_tui.manifest.schema import Context
from eq_tui.manifest.yaml_lines import Path_

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_project(ctx: Context, top: dict[str, Any]) -> str:
    if "project" in top:
        return ctx.identifier(top["project"], ("project",), "project")
    # No project: the file's stem, made a valid id, names the run dir.
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(ctx.source).stem).strip("-.")
    return stem or "eq-tui"


def parse_env(ctx: Context, raw: Any) -> dict[str, EnvVar]:
    if raw is None:
        return {}
    env: dict[str, EnvVar] = {}
    for name, value in ctx.mapping(raw, ("env",)).items():
        path: Path_ = ("env", str(name))
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            ctx.fail(f"{name!r} is not a valid environment variable name", path)
        env[name] = _env_var(ctx, value, path)
    return env


def _env_var(ctx: Context, value: Any, path: Path_) -> EnvVar:
    if not isinstance(value, dict):
        return EnvVar(_env_text(ctx, value, path))
    ctx.check_keys(value, schema.ENV_KEYS, path)
    sources = [key for key in ("value", "from_env", "from_file") if key in value]
    if len(sources) != 1:
        ctx.fail("give exactly one of 'value', 'from_env' or 'from_file'"
                 + (f", not {' and '.join(sources)}" if sources else ""), path)
    secret = ctx.boolean(value.get("secret", sources[0] != "value"), (*path, "secret"))
    if sources[0] == "value":
        return EnvVar(value=_env_text(ctx, value["value"], (*path, "value")), secret=secret)
    if not secret:
        ctx.fail(f"a value read {sources[0]} is always secret; drop 'secret: false'",
                 (*path, "secret"))
    line = ctx.line((*path, sources[0]))
    if sources[0] == "from_env":
        name = ctx.string(value["from_env"], (*path, "from_env"))
        if not _ENV_NAME.fullmatch(name):
            ctx.fail(f"{name!r} is not a valid environment variable name", (*path, "from_env"))
        return EnvVar(value="", secret=True, from_env=name, provided=False, line=line)
    where = ctx.string(value["from_file"], (*path, "from_file"))
    if not where:
        ctx.fail("from_file needs a path", (*path, "from_file"))
    return EnvVar(value="", secret=True, from_file=where, provided=False, line=line)


def _env_text(ctx: Context, value: Any, path: Path_) -> str:
    if isinstance(value, bool):
        return ctx.scalar_text(value, path)
    return ctx.string(value, path, allow_numbers=True)


def parse_oom_retry(ctx: Context, raw: Any) -> OomRetry:
    base = OomRetry()
    if raw is None:
        return base
    oom = ctx.mapping(raw, ("oom_retry",))
    ctx.check_keys(oom, schema.OOM_KEYS, ("oom_retry",))
    return OomRetry(
        delay=ctx.number(oom.get("delay", base.delay), ("oom_retry", "delay"), minimum=0),
        max_attempts=ctx.integer(oom.get("max_attempts", base.max_attempts),
                                 ("oom_retry", "max_attempts"), minimum=1))


_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?)\s*(ms|s|m|h)?\s*")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(ctx: Context, value: Any, path: Path_) -> float:
    """Seconds from a number or a text like `60s`, `2m`, `1.5h`."""
    if isinstance(value, str):
        match = _DURATION.fullmatch(value)
        if match is None:
            ctx.fail(f"expected a duration such as 60s, 2m or 1h, got {value!r}", path)
        return float(match.group(1)) * _UNIT_S[match.group(2)]
    return ctx.number(value, path, minimum=0)


def parse_crash_guard(ctx: Context, raw: Any) -> CrashGuard:
    base = CrashGuard()
    if raw is None or raw is True:
        return base
    if raw is False:
        return CrashGuard(enabled=False)
    guard = ctx.expect(raw, (dict,), "false, true or a mapping with 'after' and 'within'",
                       ("crash_guard",))
    ctx.check_keys(guard, schema.CRASH_GUARD_KEYS, ("crash_guard",))
    within = parse_duration(ctx, guard.get("within", base.within), ("crash_guard", "within"))
    if within <= 0:
        ctx.fail("must be longer than 0 seconds", ("crash_guard", "within"))
    return CrashGuard(after=ctx.integer(guard.get("after", base.after), ("crash_guard", "after"),
                                        minimum=1),
                      within=within)
