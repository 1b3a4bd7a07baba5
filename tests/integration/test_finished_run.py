"""A run whose engine is not running (its queue finished, or it was stopped) is still a run you
can act on from the shell: a verb starts its engine in the background and applies the command,
`--detach --retry-stuck` retries its stuck jobs, and what each command says leads somewhere.
Real engines in their own processes, simulated GPUs; what ran is read from the sim's records."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.ground_truth import launches

pytestmark = pytest.mark.integration
EQ = [sys.executable, "-m", "eq_tui"]
# needs_fix fails until the file `fixed` exists in the manifest's folder: "fix the cause"
MANIFEST = """\
project: fix
hosts: [{name: sim, simulate: {gpus: 2}}]
poll: 0.3
jobs:
  - {id: ok, cmd: "fake-train --epochs 1 --epoch-seconds 0.1 --mem 500"}
  - {id: needs_fix, cmd: "test -e fixed && fake-train --epochs 1 --epoch-seconds 0.1 --mem 500"}
"""


def eq(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EQ, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def status(where: str, cwd: Path) -> dict[str, object]:
    answer: dict[str, object] = json.loads(eq("status", where, "--json", cwd=cwd).stdout)
    return answer


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def engine_gone(run_dir: Path) -> bool:
    return not (run_dir / "control.json").exists()


def finished_with_a_stuck_job(folder: Path) -> Path:
    (folder / "m.yaml").write_text(MANIFEST)
    first = eq("m.yaml", "--no-ui", cwd=folder)
    assert first.returncode == 1, first.stdout + first.stderr
    run_dir = folder / "experiment_queue" / "fix"
    assert status("m.yaml", folder)["counts"] == {"completed": 1, "stuck": 1}
    return run_dir


def test_a_finished_runs_stuck_job_is_retried_from_the_shell(tmp_path: Path) -> None:
    run_dir = finished_with_a_stuck_job(tmp_path)
    # --detach says it has finished, and what to run: the retry itself, not a circle
    again = eq("m.yaml", "--detach", cwd=tmp_path)
    assert again.returncode == 1, again.stderr
    line = next(x for x in again.stdout.splitlines() if x.strip().startswith("run again:"))
    retry = shlex.split(line.split(":", 1)[1].split("   (")[0])
    assert retry == ["eq-tui", "retry", str(run_dir.resolve()), "needs_fix"]
    assert "every stuck: eq-tui m.yaml --detach --retry-stuck" in again.stdout
    # so does attach, which has no engine to attach to
    attach = eq("attach", "m.yaml", cwd=tmp_path)
    assert attach.returncode == 3 and "(its queue has finished: completed 1, stuck 1)" in \
        attach.stderr
    assert "`eq-tui retry experiment_queue/fix needs_fix` runs jobs again" in attach.stderr
    assert "--resume" not in attach.stderr
    # --no-start: a script that wants no engine started gets exit 3, as before
    refused = eq(*retry[1:], "--no-start", cwd=tmp_path)
    assert refused.returncode == 3 and "no engine is running for" in refused.stderr
    assert engine_gone(run_dir) and status("m.yaml", tmp_path)["counts"] == {
        "completed": 1, "stuck": 1}
    (tmp_path / "fixed").touch()
    done = eq(*retry[1:], cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "retry needs_fix: done\n"), done.stderr
    assert "no engine was running for" in done.stderr and "started one in the background" \
        in done.stderr
    # the engine runs it to the end, then exits by itself
    wait_until(lambda: status("m.yaml", tmp_path)["counts"] == {"completed": 2}
               and engine_gone(run_dir), "needs_fix completed and its engine gone")
    ran = launches([run_dir / "sim" / "sim"])
    assert ran[("needs_fix", 2)] == 1 and ran[("ok", 1)] == 1 and ran[("ok", 2)] == 0
    # a verb that finds nothing to do leaves no engine behind
    late = eq("hold", ".", "ok", cwd=tmp_path)
    assert late.returncode == 1 and "hold ok: " in late.stdout
    wait_until(lambda: engine_gone(run_dir), "the engine started for the hold exits")


def test_detach_retry_stuck_on_a_finished_run(tmp_path: Path) -> None:
    run_dir = finished_with_a_stuck_job(tmp_path)
    (tmp_path / "fixed").touch()
    started = eq("m.yaml", "--detach", "--retry-stuck", cwd=tmp_path)
    assert started.returncode == 0, started.stdout + started.stderr
    assert "engine for m.yaml is running in the background" in started.stdout
    wait_until(lambda: status(str(run_dir), tmp_path)["counts"] == {"completed": 2}
               and engine_gone(run_dir), "needs_fix completed and its engine gone")
    assert launches([run_dir / "sim" / "sim"])[("needs_fix", 2)] == 1


LONG = """\
project: stopped
hosts: [{name: sim, simulate: {gpus: 2}}]
poll: 0.3
jobs:
  - {id: long, cmd: "fake-train --epochs 600 --epoch-seconds 0.1 --mem 500"}
"""


def test_a_verb_on_a_stopped_run_is_applied_before_anything_launches(tmp_path: Path) -> None:
    """The engine a verb starts launches nothing before the verb's command: a job held from
    the shell never starts, though a GPU is free for it from the engine's first tick."""
    (tmp_path / "m.yaml").write_text(LONG)
    run_dir = tmp_path / "experiment_queue" / "stopped"
    assert eq("m.yaml", "--detach", cwd=tmp_path).returncode == 0
    try:
        wait_until(lambda: status("m.yaml", tmp_path)["counts"] == {"running": 1},
                   "long running")
        assert eq("stop", "m.yaml", cwd=tmp_path).returncode == 0
        wait_until(lambda: engine_gone(run_dir), "the engine stopped")
        # the manifest gains a job while no engine runs; the next engine adds it, pending
        (tmp_path / "m.yaml").write_text(LONG + '  - {id: w, cmd: "fake-train --epochs 1 '
                                                '--epoch-seconds 0.1 --mem 500"}\n')
        held = eq("hold", "m.yaml", "w", cwd=tmp_path)
        assert (held.returncode, held.stdout) == (0, "hold w: done\n"), held.stderr
        jobs = {j["id"]: j["status"] for j in json.loads(
            eq("status", "m.yaml", "--jobs", "--json", cwd=tmp_path).stdout)}
        assert jobs == {"long": "running", "w": "held"}
        assert ("w", 1) not in launches([run_dir / "sim" / "sim"])
        # pause has nothing to pause without an engine, and says so (no engine is started)
    finally:
        eq("kill", "m.yaml", "long", cwd=tmp_path)
        eq("stop", "m.yaml", cwd=tmp_path)
        wait_until(lambda: engine_gone(run_dir), "the engine stopped")
    assert ("w", 1) not in launches([run_dir / "sim" / "sim"])
    paused = eq("pause", "m.yaml", cwd=tmp_path)
    assert paused.returncode == 3 and re.search("nothing launches without one", paused.stderr)
    assert engine_gone(run_dir)


async def test_an_engine_started_for_a_command_waits_for_it(tmp_path: Path) -> None:
    """What a shell verb's engine does before its command comes: launch nothing, and not end
    at a finished queue; after it, the queue runs (or ends) as any other."""
    from tests.support.engine_run import job, make_manifest, run_to_end, start_engine

    manifest = make_manifest(tmp_path, [job("a"), job("b")])
    code, _ = await run_to_end(manifest, tmp_path / "run")
    assert code == 0
    # a finished queue: the engine stays up for the command it was started for
    run = await start_engine(manifest, tmp_path / "run", await_command=60)
    try:
        await run.ticks_pass(3)
        assert run.task is not None and not run.task.done()
        assert not any(e.type == "queue_finished" for e in run.events)
        answer = await run.engine.command("retry", ["b"])  # b completed: not retried
        assert answer["results"] == {"b": "cannot retry a completed job"}, answer
        assert await asyncio.wait_for(run.task, 30) == 0  # then it ends, as the queue has
    finally:
        await run.stop()
    # an unfinished one: nothing launches before the command, however many ticks pass
    more = make_manifest(tmp_path, [job("a"), job("b"), job("c")])
    run = await start_engine(more, tmp_path / "run", await_command=60)
    try:
        await run.ticks_pass(3)
        assert run.status("c") == "pending" and ("c", 1) not in launches(
            [tmp_path / "run" / "sim" / "sim"])
        assert (await run.engine.command("hold", ["c"]))["ok"]
        await run.ticks_pass(3)
        assert run.status("c") == "held"
        assert (await run.engine.command("release", ["c"]))["ok"]
        await run.wait_for(lambda: run.status("c") == "completed")
    finally:
        await run.stop()
