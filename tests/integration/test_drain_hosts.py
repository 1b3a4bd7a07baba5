"""`eq-tui drain` / `undrain` on two real sshd hosts (issue 44 item 4), the verbs typed in their own
process as a person types them. What ran where is read from the hosts' own records — each
attempt dir's `start` and `exit` files (the host's clock) under each host's own log_dir, and
fake-train's epoch records (runs.jsonl) — never the engine's state:

- `drain alpha`: no attempt starts on alpha after the command returned, while beta takes the
  queue; `status --gpus` says so; a host or GPU the run lacks is exit 2; `undrain alpha`: alpha
  starts jobs again;
- `drain alpha --now --grace 3s`: the checkpointed job there gets its contract's signal (USR1),
  stops within the grace + 10 s and resumes on beta from its newest checkpoint (at most one
  epoch run twice), and completes."""

from __future__ import annotations

import asyncio
import shutil
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest

from eq_tui.manifest.loader import load_manifest
from eq_tui.sim.state import read_runs
from tests.support.engine_run import EngineRun, start_engine
from tests.support.polling import wait_until
from tests.support.shell_verb import eq
from tests.support.sshbed import USER, SshBed

pytestmark = pytest.mark.integration

BED_HOSTS = [("alpha", 1, 24576, "Sim"), ("beta", 2, 24576, "Sim")]
HOSTS = """\
hosts:
  - {{name: alpha, ssh: alpha, log_dir: {work}/logs-alpha}}
  - {{name: beta, ssh: beta, log_dir: {work}/logs-beta}}
"""
QUEUE = """\
project: drainq
cwd: {work}
""" + HOSTS + """\
stale_grace_s: 1
grid: {{n: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]}}
template:
  id: "j${{n}}"
  cmd: "fake-train --epochs 4 --epoch-seconds 0.8 --mem 1000 --seed ${{n}}"
"""
EPOCHS = 16
CHECKPOINTED = """\
project: drainnow
cwd: {work}
""" + HOSTS + """\
stale_grace_s: 1
checkpoint: {{path: "ckpt/${{id}}/epoch-*.pt", resume: "--resume {{checkpoint}}", signal: USR1}}
jobs:
  - {{id: long, cmd: "fake-train --epochs """ + str(EPOCHS) + """ --epoch-seconds 0.5 --mem 1000 \
--seed 3 --checkpoint-dir ckpt/long"}}
"""


def starts(work: Path, host: str) -> dict[str, float]:
    """attempt ("job/aN") -> when it started on `host`, from the attempt dirs' start files."""
    found = {}
    for path in (work / f"logs-{host}").glob("*/*/*/start"):
        text = path.read_text().strip()
        if text:
            found[f"{path.parent.parent.name}/{path.parent.name}"] = float(text)
    return found


async def started_run(bed: SshBed, tmp_path: Path, work: Path, text: str,
                      await_command: float = 0.0) -> EngineRun:
    path = tmp_path / "m.yaml"
    path.write_text(text.format(work=work))
    return await start_engine(load_manifest(path), tmp_path / "run", poll=0.3,
                              ssh_config=str(bed.ssh_config), await_command=await_command)


async def test_drain_stops_launches_there_and_undrain_gives_the_host_back(
        bed: SshBed, bed_work: Path, tmp_path: Path) -> None:
    run = await started_run(bed, tmp_path, bed_work, QUEUE)
    run_dir = str(tmp_path / "run")
    try:
        await wait_until(lambda: _any(starts(bed_work, "alpha")), 60, "a start on alpha")
        code, out, err = await eq("drain", run_dir, "alpha")
        returned = time.time()
        assert code == 0 and "drain alpha: done" in out, (out, err)
        # beta takes the queue: three more attempts start there after the drain returned
        await wait_until(lambda: _any(len([t for t in starts(bed_work, "beta").values()
                                           if t > returned]) >= 3), 90, "beta's starts")
        late = {a: t for a, t in starts(bed_work, "alpha").items() if t > returned}
        assert late == {}, f"started on the drained host after the drain returned: {late}"
        # what still waits waits on until alpha is given back: beta alone must not empty the
        # queue before the undrain (it did, on a loaded box)
        code, out, err = await eq("hold", run_dir, "--filter", "status:pending")
        assert code == 0, (out, err)
        for wrong, words in ((["gamma"], "no host 'gamma'"),
                             (["beta", "--gpus", "5"], "beta has no GPU 5 of ours")):
            code, out, err = await eq("drain", run_dir, *wrong)
            assert code == 2 and words in err and "Traceback" not in err, (code, out, err)
        # polled: status reads queue_state.json, which is briefly absent while a write
        # renames the old copy aside (runfiles/atomic.py)
        await wait_until(lambda: _shows_drained(run_dir), 20, "status --gpus: [drained]")
        code, out, err = await eq("undrain", run_dir, "alpha")
        given_back = time.time()
        assert code == 0 and "undrain alpha: done" in out, (out, err)
        code, out, err = await eq("release", run_dir, "--filter", "status:held")
        assert code == 0, (out, err)
        await wait_until(lambda: _any(any(t > given_back for t in
                                          starts(bed_work, "alpha").values())),
                         90, "a start on alpha after undrain")
        assert run.task is not None
        assert await asyncio.wait_for(run.task, 120) == 0
    finally:
        await run.stop()


async def test_drain_now_stops_the_job_there_and_it_resumes_on_the_other_host(
        bed: SshBed, bed_work: Path, tmp_path: Path) -> None:
    (bed_work / "ckpt").mkdir()
    shutil.chown(bed_work / "ckpt", USER, USER)
    # beta drained before anything launches (the engine waits for a first command), so the
    # job starts on alpha
    run = await started_run(bed, tmp_path, bed_work, CHECKPOINTED, await_command=60)
    run_dir = str(tmp_path / "run")
    try:
        code, out, err = await eq("drain", run_dir, "beta")
        assert code == 0, (out, err)
        await wait_until(lambda: _any(max(epochs(bed, "alpha").get(1, [0])) >= 3), 60,
                         "3 epochs on alpha")
        code, out, err = await eq("undrain", run_dir, "beta")
        assert code == 0, (out, err)
        asked = time.time()
        code, out, err = await eq("drain", run_dir, "alpha", "--now", "--grace", "3s")
        assert code == 0 and "stopped to resume elsewhere: long" in out, (out, err)
        exit_file = next((bed_work / "logs-alpha").glob("*/long/a1/exit"))
        assert ended_at(exit_file) - asked <= 3 + 10
        # the contract's signal, not SIGTERM: fake-train does not catch USR1 and dies of it
        assert exit_file.read_text().split()[0] == str(128 + signal.SIGUSR1), \
            exit_file.read_text()
        assert run.task is not None
        assert await asyncio.wait_for(run.task, 120) == 0
    finally:
        await run.stop()
    first, second = epochs(bed, "alpha")[1], epochs(bed, "beta")[2]
    # the second attempt ran on beta from the newest checkpoint the first saved: at most
    # the epoch under way when it was stopped ran twice, none was skipped
    assert second[0] in (first[-1], first[-1] + 1), (first, second)
    assert second[-1] == EPOCHS and set(first) | set(second) == set(range(1, EPOCHS + 1))
    cmd = next((bed_work / "logs-beta").glob("*/long/a2/cmd")).read_text()
    assert "--resume" in cmd, cmd
    assert not list((bed_work / "logs-alpha").glob("*/long/a2"))


def ended_at(exit_file: Path) -> float:
    return float(exit_file.stat().st_mtime)


def epochs(bed: SshBed, host: str) -> dict[int, list[int]]:
    """attempt -> the epochs fake-train finished in it on `host`, from its own records."""
    done: dict[int, list[int]] = defaultdict(list)
    for record in read_runs(bed.hosts[host].sim_state):
        if record.get("event") == "epoch":
            done[int(record["attempt"])].append(int(record["epoch"]))
    return dict(done)


async def _shows_drained(run_dir: str) -> bool:
    _code, shown, _ = await eq("status", run_dir, "--gpus")
    return "alpha GPU 0" in shown and "[drained]" in shown.split("alpha GPU 0", 1)[1] \
        .split("\n", 1)[0]


async def _any(value: object) -> bool:
    return bool(value)
