"""A phase the crash guard holds says the exact commands a person runs — in the alert `--no-ui`
prints, in the notification, in `eq-tui status` — and a headless run waits for that person;
the printed retry, run as printed, retries every stuck job of the phase (they share the cause),
releases it, and the queue runs to its end with none left stuck. `eq-tui
release RUN_DIR --phase P` lifts the hold without a retry. Real processes, simulated GPUs."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.engine_run import job, make_manifest, sim_hosts, start_engine

pytestmark = pytest.mark.integration
EQ = [sys.executable, "-m", "eq_tui"]
MANIFEST = """\
project: held
hosts: [{{name: sim, simulate: {{gpus: 2}}}}]
poll: 0.3
notify:
  - {{command: "cat >> {notes}; echo >> {notes}", on: [stuck]}}
default_cmd: python3 train.py
grid: {{lr: [0.1, 0.01, 0.001], seed: [1, 2]}}
template:
  id: "lr${{lr}}_s${{seed}}"
  args: {{lr: "${{lr}}", seed: "${{seed}}"}}
"""
BROKEN = "raise SystemExit('bad config')\n"
FIXED = "print('epoch 1/1 loss=0.5 val_acc=0.9')\n"


def eq(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EQ, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_held_phase_under_no_ui_says_what_to_run_and_waits_for_it(tmp_path: Path) -> None:
    notes = tmp_path / "notes.jsonl"
    (tmp_path / "m.yaml").write_text(MANIFEST.format(notes=shlex.quote(str(notes))))
    (tmp_path / "train.py").write_text(BROKEN)
    out = tmp_path / "out.txt"
    run_dir = (tmp_path / "experiment_queue" / "held").resolve()
    with open(out, "w") as sink:
        process = subprocess.Popen([*EQ, "m.yaml", "--no-ui"], cwd=tmp_path, stdout=sink,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: "Launching phase main is held" in out.read_text(), "the hold")
        said = out.read_text()
        retry = re.search(rf"`(eq-tui retry {run_dir} --stuck --phase main)` \(retries every "
                          r"stuck job of the phase and releases it\)", said)
        assert retry is not None, said
        # the alert names each job that crashed alike
        named = re.search(r"crash guard: (\d+) jobs of phase main \(([^)]*)\)", said)
        assert named is not None and len(named.group(2).split(", ")) == int(named.group(1))
        assert f"`eq-tui release {run_dir} --phase main` to launch the rest as they are" in said
        assert "r in the UI" not in said
        # the notification went out, the held phase first and in full, with the same commands
        wait_until(lambda: "phase main held" in notes.read_text() if notes.exists() else False,
                   "the held phase's notification")
        message = next(json.loads(line) for line in notes.read_text().splitlines()
                       if "phase main held" in line)
        assert message["text"].splitlines()[1].startswith("[held] phase main held: ")
        assert retry.group(1) in message["text"] and "--phase main" in message["text"]
        # status says the same; the headless run waits for a person (it has not exited)
        status = eq("status", "m.yaml", cwd=tmp_path)
        assert status.returncode == 1
        assert "`eq-tui retry experiment_queue/held --stuck --phase main`" in status.stdout
        assert "`eq-tui release experiment_queue/held --phase main`" in status.stdout
        assert json.loads(eq("status", "m.yaml", "--json", cwd=tmp_path).stdout)["live"]
        assert process.poll() is None
        # fix the script, run the retry as printed: every stuck job runs again, the phase to
        # its end (once the jobs out when it was held have ended: all stuck alike)
        wait_until(lambda: not {"launching", "running"} & set(json.loads(eq(
            "status", "m.yaml", "--json", cwd=tmp_path).stdout)["counts"]), "the wave's end")
        stuck = sorted(j["id"] for j in json.loads(eq("status", "m.yaml", "--jobs", "--json",
                                                         cwd=tmp_path).stdout)
                       if j["status"] == "stuck")
        assert set(named.group(2).split(", ")) <= set(stuck)
        (tmp_path / "train.py").write_text(FIXED)
        done = eq(*shlex.split(retry.group(1))[1:], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert sorted(done.stdout.splitlines()) == [f"retry {job}: done" for job in stuck]
        assert process.wait(timeout=60) == 0  # none is left stuck
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait()
    final = json.loads(eq("status", "m.yaml", "--json", cwd=tmp_path).stdout)
    assert final["counts"] == {"completed": 6} and not final["held_phases"]
    # attempts as the hosts' attempt dirs have them: the retried jobs twice, the rest once
    tries = {path.parent.name: len(list(path.parent.glob("a*/cmd")))
             for path in run_dir.glob("logs/*/*/a1")}
    assert tries == {**dict.fromkeys(tries, 1), **dict.fromkeys(stuck, 2)} and len(tries) == 6


async def test_release_phase_lifts_the_hold_without_a_retry(tmp_path: Path) -> None:
    bad = "$HOME/no-such-trainer-xyz --lr 0.1"
    manifest = make_manifest(tmp_path, [job(f"j{i}", f"{bad} --seed {i}") for i in range(5)],
                             hosts=sim_hosts(("sim", 2)))
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        await run.wait_for(lambda: "main" in run.engine.ctx.crash_guard.held)
        held = next(e for e in run.events if e.type == "phase_held")
        assert f"eq-tui release {tmp_path / 'run'} --phase main" in held.todo  # type: ignore[attr-defined]
        await run.ticks_pass(3)
        tried = {j.id for j in run.engine.jobs.values() if j.history}
        assert len(tried) == 3  # the wave that crashed; nothing more launches while held
        answer = await run.engine.command("release", [], {"phase": "main"})
        assert answer["results"] == {"phase main": "ok"}
        await run.wait_for(lambda: all(j.status.is_finished for j in run.engine.jobs.values()))
        # the other two launched as they were; the stuck three were not retried
        assert sorted(len(j.history) for j in run.engine.jobs.values()) == [1] * 5
        assert any(e.type == "phase_released" for e in run.events)
        again = await run.engine.command("release", [], {"phase": "main"})
        assert again["results"] == {"phase main": "not held by the crash guard"}
    finally:
        await run.stop()


def test_the_headless_summary_line_says_a_phase_is_held() -> None:
    from eq_tui.cli.headless import summary_line

    class Client:
        project = "p"

        def snapshot(self) -> dict[str, object]:
            return {"jobs": [{"status": "stuck"}], "hosts": [], "created": 1.0,
                    "held_phases": {"main": "crash guard: ..."}}

    line = summary_line(Client(), 62.0)  # type: ignore[arg-type]
    assert line.endswith("1 job: stuck 1 | hosts  | 1m01s HELD main (waits for a person: "
                         "`eq-tui status` says what to run)")


def test_release_takes_a_phase_or_jobs_from_the_shell() -> None:
    from eq_tui.api.commands import Release
    from eq_tui.cli.queue_verbs import parse_verb
    from eq_tui.errors import UsageError

    assert parse_verb("release", ["run", "--phase", "main"]).command == Release(phase="main")
    assert parse_verb("release", ["run", "a"]).command == Release(("a",))
    for argv in (["run"], ["run", "a", "--phase", "main"]):
        with pytest.raises(UsageError):
            parse_verb("release", argv)
