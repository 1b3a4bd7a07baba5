"""Preemption on a real sshd host (issue 44 item 3), the preemptor added from the shell as a
person adds it (`eq-tui add --preempt`). What ran is read from the host's own records: each
attempt dir's `start` file (the host's clock), fake-train's epoch records (runs.jsonl) and the
attempt's `cmd`; the final numbers from the results against an identical job that never
stopped (same seed, same epochs, no checkpoint contract: so never a victim).

One GPU, busy with a low-priority checkpointed job; a `preempt` job of priority 5 is added: it
starts within the grace plus a tick (the victim catches no signal and dies of it at once), the
low job resumes from its newest checkpoint once the GPU is free again and completes, with at
most one epoch run twice."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from eq_tui.manifest.loader import load_manifest
from eq_tui.sim.state import read_runs
from tests.support.engine_run import start_engine
from tests.support.polling import wait_until
from tests.support.shell_verb import eq
from tests.support.sshbed import USER, SshBed

pytestmark = pytest.mark.integration

BED_HOSTS = [("solo", 1, 24576, "Sim")]
EPOCHS = 24
GRACE_S = 3
POLL_S = 0.3
TRAIN = f"fake-train --epochs {EPOCHS} --mem 1000 --seed 3"
MANIFEST = f"""\
project: preemptssh
cwd: {{work}}
hosts:
  - {{{{name: solo, ssh: solo, log_dir: {{work}}/logs}}}}
jobs:
  - id: low
    cmd: "{TRAIN} --epoch-seconds 0.3 --checkpoint-dir ckpt/low"
    checkpoint: {{{{path: "ckpt/low/epoch-*.pt", resume: "--resume {{{{checkpoint}}}}", \
grace: {GRACE_S}}}}}
"""


def epochs(bed: SshBed) -> dict[int, list[int]]:
    """attempt -> the epochs fake-train finished in it (only `low` checkpoints: only it has
    epoch records)."""
    done: dict[int, list[int]] = {}
    for record in read_runs(bed.hosts["solo"].sim_state):
        if record.get("event") == "epoch" and record.get("job") == "low":
            done.setdefault(int(record["attempt"]), []).append(int(record["epoch"]))
    return done


def started_at(work: Path, job: str, attempt: int) -> float | None:
    found = list((work / "logs").glob(f"*/{job}/a{attempt}/start"))
    text = found[0].read_text().strip() if found else ""
    return float(text) if text else None


async def test_a_preempt_job_added_from_the_shell_stops_the_checkpointed_one_over_ssh(
        bed: SshBed, bed_work: Path, tmp_path: Path) -> None:
    (bed_work / "ckpt").mkdir()
    shutil.chown(bed_work / "ckpt", USER, USER)
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST.format(work=bed_work))
    run = await start_engine(load_manifest(path), tmp_path / "run", poll=POLL_S,
                             ssh_config=str(bed.ssh_config))
    try:
        await wait_until(lambda: _true(max(epochs(bed).get(1, [0])) >= 3), 60,
                         "3 epochs of low")
        code, out, err = await eq("add", str(run.run_dir), "--id", "urgent", "--priority", "5",
                                  "--preempt", "--", "fake-train --epochs 2 "
                                  "--epoch-seconds 0.4 --mem 1000")
        assert code == 0, (out, err)
        await wait_until(lambda: _true(started_at(bed_work, "urgent", 1)), 60, "urgent's start")
        assert run.task is not None
        assert await asyncio.wait_for(run.task, 120) == 0
    finally:
        await run.stop()
    urgent = started_at(bed_work, "urgent", 1)
    # from the job's adding (the engine's event) to its start on the host: the grace and a
    # tick at most (the victim catches no signal: it dies of it at once), with a second for
    # the round trips to the host
    added = next(e.at for e in run.events if e.type == "job_added")
    assert urgent is not None and urgent - added <= GRACE_S + POLL_S + 1, urgent - added
    # the victim's second attempt began after the preemptor and from the newest checkpoint
    # its first saved: at most the epoch under way ran twice, none was skipped
    resumed = started_at(bed_work, "low", 2)
    assert resumed is not None and resumed > urgent
    first, second = epochs(bed)[1], epochs(bed)[2]
    assert second[0] in (first[-1], first[-1] + 1), (first, second)
    assert second[-1] == EPOCHS and set(first) | set(second) == set(range(1, EPOCHS + 1))
    cmd = next((bed_work / "logs").glob("*/low/a2/cmd")).read_text()
    assert f"--resume ckpt/low/epoch-{second[0] - 1}.pt" in cmd, cmd


async def _true(value: object) -> bool:
    return bool(value)
