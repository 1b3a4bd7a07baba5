"""The test suite's own rules (docs/testing.md, "Timing"): no fixed sleep before an assertion.
A test waits for the state it expects (`EngineRun.wait_for`, tests/tui/pilot_wait.py's
`eventually`); a sleep of a set length and then an assertion passes or fails by the machine's
load."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
LOOK_AHEAD = 3  # statements after a sleep in which an assertion counts as gated by it


def _fixed_sleep(statement: ast.stmt) -> bool:
    """`time.sleep(N)`, `await asyncio.sleep(N)` or `await pilot.pause(N)` with N written out
    (a bare `pilot.pause()` only lets pending messages through)."""
    call = statement.value if isinstance(statement, ast.Expr) else None
    if isinstance(call, ast.Await):
        call = call.value
    if not isinstance(call, ast.Call) or not call.args:
        return False
    name = ast.unparse(call.func)
    timed = name in ("time.sleep", "sleep", "asyncio.sleep") or name.endswith("pilot.pause")
    return timed and isinstance(call.args[0], ast.Constant) and bool(call.args[0].value)


def sleeps_before_assertions(source: str, where: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            for i, statement in enumerate(block):
                if not isinstance(statement, ast.stmt) or not _fixed_sleep(statement):
                    continue
                gated = next((later for later in block[i + 1:i + 1 + LOOK_AHEAD]
                              if any(isinstance(n, ast.Assert) for n in ast.walk(later))), None)
                if gated is not None:
                    found.append(f"{where}:{statement.lineno}: {ast.unparse(statement)} "
                                 f"before {ast.unparse(gated)[:60]}")
    return found


def test_no_fixed_sleep_gates_an_assertion() -> None:
    found = [hit for path in sorted(TESTS.rglob("*.py"))
             for hit in sleeps_before_assertions(path.read_text(), str(path.relative_to(TESTS)))]
    assert found == []


def test_the_rule_sees_each_kind_of_fixed_wait_and_lets_polling_be() -> None:
    planted = '''
import asyncio, time
async def a(pilot, run):
    time.sleep(0.5)
    assert run.launched == 3
async def b(pilot):
    await pilot.pause(0.3)
    text = pilot.app.render()
    assert "x" in text
async def c(run):
    await asyncio.sleep(1)
    if run.done:
        assert run.ok
async def fine(pilot, run):
    await pilot.pause()
    assert pilot.app
    while not run.done:
        await asyncio.sleep(0.1)
    assert run.ok
'''
    found = sleeps_before_assertions(planted, "planted.py")
    assert [hit.split(":")[1] for hit in found] == ["4", "7", "11"]
