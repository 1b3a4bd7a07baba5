"""A search beside a packing phase, and a second user's engine on the same two real sshd boxes
(two simulated GPUs each), judged from the hosts' own records (tests/support/bookings.py), never
from either engine's state: every job runs once, the estimates on a GPU never add up to more than
its memory (packed jobs of both engines may share one: that is no double booking), and the
search's trials are packed by their memory like any job: a trial shares its GPU with another."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.bookings import BOOKED_CMD, bookings, most_claimed, timeline, two_user_boxes
from tests.support.sshbed import OTHER_USER, USER, SshBed

pytestmark = pytest.mark.integration
USERS = (USER, OTHER_USER)
GPU_MIB = 24576
MIB = 10000  # two to a GPU
CMD = f"{BOOKED_CMD}; sleep 1; fake-train --epochs 2 --epoch-seconds 0.5 --mem {MIB}"


@pytest.fixture(scope="module")
def bed() -> Iterator[SshBed]:
    ssh_bed = two_user_boxes(GPU_MIB)
    yield ssh_bed
    ssh_bed.close()


def manifest(bed: SshBed, tmp: Path, user: str, project: str, body: list[str]) -> Path:
    lines = [f"project: {project}", "hosts:"]
    lines += [f"  - {{name: {name}, ssh: {bed.alias(name, user)}}}" for name in bed.hosts]
    path = tmp / f"{project}.yaml"
    path.write_text("\n".join([*lines, f"mem_mib: {MIB}", *body]) + "\n")
    return path


def searcher(project: str) -> list[str]:
    """A packing phase and, beside it, a search of 3 trials."""
    return ["phases:", "  - name: pack", "    jobs:",
            *[f"      - {{id: {project}-p{i}, cmd: {json.dumps(f'{CMD} --seed {i}')}}}"
              for i in range(4)],
            "  - name: tune", "    goal: {val_acc: max}", "    search:",
            "      space: {lr: {low: 0.001, high: 0.1, log: true}}",
            "      trials: 3", "      sampler: random", "      seed: 0",
            f"    template: {{cmd: {json.dumps(CMD + ' --lr ${lr} --metrics jsonl')}}}"]


def other(project: str) -> list[str]:
    return ["jobs:", *[f"  - {{id: {project}-{i}, cmd: {json.dumps(f'{CMD} --seed {i}')}}}"
                       for i in range(6)]]


def test_a_search_beside_packing_and_another_user_packs_its_trials_and_never_double_books(
        bed: SshBed, tmp_path: Path) -> None:
    since, tag = time.time(), secrets.token_hex(3)
    projects = (f"sa{tag}", f"sb{tag}")
    engines = []
    for user, project, body in ((USER, projects[0], searcher(projects[0])),
                                (OTHER_USER, projects[1], other(projects[1]))):
        run_dir = tmp_path / f"run-{project}"
        engines.append((subprocess.Popen(
            [sys.executable, "-m", "eq_tui", str(manifest(bed, tmp_path, user, project, body)),
             "--no-ui", "--poll", "0.5", "--run-dir", str(run_dir),
             "--ssh-config", str(bed.ssh_config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True), run_dir))
    try:
        said = [engine.communicate(timeout=120)[0] for engine, _ in engines]
    finally:
        for engine, _ in engines:
            if engine.poll() is None:
                engine.kill()
                engine.wait()
    for (engine, run_dir), out in zip(engines, said, strict=True):
        assert engine.returncode == 0, out[-3000:]
        state = json.loads((run_dir / "queue_state.json").read_text())
        assert {job["status"] for job in state["jobs"]} == {"completed"}, out[-3000:]
    found = bookings(USERS, projects, since=since)
    trials = {b.job for b in found if b.job.startswith("tune-")}
    assert trials == {"tune-t0", "tune-t1", "tune-t2"}, {b.job for b in found}
    assert len(found) == 4 + 3 + 6  # every job on one GPU, once
    # packed jobs of both engines may share a GPU: a double booking is more than its memory
    most = most_claimed(found, {b.job: MIB for b in found})
    assert max(most.values()) <= GPU_MIB, (most, timeline(found))
    shared = [(t, b) for t in found if t.job in trials for b in found
              if b is not t and (b.host, b.gpu) == (t.host, t.gpu)
              and b.start < t.end and t.start < b.end]
    assert shared, ("no trial shared its GPU: not packed by memory", timeline(found))
