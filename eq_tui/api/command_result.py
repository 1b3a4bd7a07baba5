"""A command's typed answer: per job "ok" or why not, and what else it has to say."""

from __future__ import annotations

from typing import Any

from eq_tui.api.client import CommandResult


def result(results: dict[str, str] | None = None, error: str | None = None,
           detail: dict[str, Any] | None = None) -> CommandResult:
    results = results or {}
    ok = error is None and all(value == "ok" for value in results.values())
    if not ok and error is None:
        error = "some jobs were not changed"
    done: CommandResult = {"ok": ok, "results": results, "error": error}
    if detail is not None:
        done["detail"] = detail
    return done
