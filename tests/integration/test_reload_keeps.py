"""`eq-tui reload` keeps what a person changed from the shell — an edited command, a priority,
a hold — unless `--force`, and says which of the file's changes it left out for them. A real
engine on a simulated host, the verbs in their own processes, what ran read from the host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eq_tui.manifest.loader import load_manifest
from tests.support.engine_run import FAST_JOB, start_engine
from tests.support.shell_verb import eq

pytestmark = pytest.mark.integration
LONG = "fake-train --epochs 600 --epoch-seconds 0.1 --mem 1000"


def manifest(jobs: dict[str, str], priorities: dict[str, int] | None = None) -> str:
    """Phase b's jobs wait for phase a's long job: they stay waiting while the test works."""
    lines = [f"      - {{id: {i}, cmd: \"{c}\", priority: {(priorities or {}).get(i, 0)}}}"
             for i, c in jobs.items()]
    return ("project: keeps\nhosts: [{name: sim, simulate: {gpus: 2, memory_mib: 24576}}]\n"
            "phases:\n  - name: a\n    jobs:\n"
            f"      - {{id: long, cmd: \"{LONG}\"}}\n"
            "  - name: b\n    depends_on: a\n    jobs:\n" + "\n".join(lines) + "\n")


async def test_reload_keeps_a_persons_edit_priority_and_hold_unless_forced(
        tmp_path: Path) -> None:
    source = tmp_path / "sweep.yaml"
    first = {f"j{i}": f"{FAST_JOB} --seed {i}" for i in range(1, 5)}
    source.write_text(manifest(first))
    run_dir = tmp_path / "run"
    run = await start_engine(load_manifest(str(source)), run_dir, exit_when_done=False)
    where = str(run_dir)
    try:
        await run.wait_for(lambda: run.status("long") == "running")
        # a person's changes, from the shell
        assert (await eq("edit", where, "j3", "--add-flag", "lr=0.5"))[0] == 0
        edited = f"{FAST_JOB} --seed 3 --lr 0.5"
        assert (await eq("priority", where, "j2", "5"))[0] == 0
        assert (await eq("hold", where, "j4"))[0] == 0
        # the file changes j1's and j3's commands and j2's priority, and drops j4
        second = {"j1": f"{FAST_JOB} --seed 11", "j2": first["j2"],
                  "j3": f"{FAST_JOB} --seed 33"}
        source.write_text(manifest(second, {"j2": 1}))
        code, out, _ = await eq("reload", where)
        assert code == 0, out
        assert out.splitlines() == [
            f"reload of {source}",
            "  update j1",
            "  not apply to j2: its priority 1 (a person set 5); --force applies the file's",
            f"  not apply to j3: its command `{FAST_JOB} --seed 33` (a person's edit "
            f"`{edited}` stays); --force applies the file's",
            "  not apply to j4: its retirement (a person held it); --force applies the file's"]
        jobs = run.engine.jobs
        assert jobs["j1"].cmd == f"{FAST_JOB} --seed 11"
        assert (jobs["j2"].priority, jobs["j3"].cmd, run.status("j4")) == (5, edited, "held")
        # once more: nothing new to say of j1, the person's changes still stand
        code, out, _ = await eq("reload", where, "--json")
        plan = json.loads(out)["detail"]
        assert code == 0 and (plan["update"], plan["retire"]) == ([], [])
        assert set(plan["by_person"]) == {"j2", "j3", "j4"}
        # --force: the file's over the person's
        code, out, _ = await eq("reload", where, "--force")
        assert code == 0, out
        assert "  update j2" in out and "  update j3" in out and "  retire j4" in out
        assert "not apply" not in out
        assert (jobs["j2"].priority, jobs["j3"].cmd) == (1, f"{FAST_JOB} --seed 33")
        assert "j4" not in jobs and not jobs["j2"].priority_set
        # phase a ends quickly now (its job killed, then run again as a short one): b runs
        assert (await eq("kill", where, "long"))[0] == 0
        await run.wait_for(lambda: run.status("long") == "killed")
        assert (await eq("edit", where, "long", "--", FAST_JOB))[0] == 0
        await run.wait_for(lambda: all(run.status(j) == "completed" for j in second), 60)
    finally:
        await run.stop()
    # each attempt's command as the host wrote it before starting its session
    cmds = {path.parent.parent.name: path.read_text().rstrip("\n")
            for path in run_dir.glob("logs/*/j*/a*/cmd")}
    assert cmds == {"j1": f"{FAST_JOB} --seed 11", "j2": first["j2"],
                    "j3": f"{FAST_JOB} --seed 33"}
    assert len(list(run_dir.glob("logs/*/j*/a*/cmd"))) == 3  # each once
