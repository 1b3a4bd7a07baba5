"""Promises of the README, each through the real binary: the variables a job sees, `--fresh`,
`user@host:port` hosts, exit 3 for a host that cannot be reached, and the demo's outcome."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.ground_truth import exits, launches, launches_per_job
from tests.support.sshbed import USER, SshBed, free_port

pytestmark = pytest.mark.integration
EQ = [sys.executable, "-m", "eq_tui"]
SAMPLES = Path(__file__).parent.parent.parent / "sample_manifests"


def eq(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EQ, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def state(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "queue_state.json").read_text())
    return data


def test_a_job_sees_the_variables_the_engine_sets(tmp_path: Path) -> None:
    show = " ".join(f'"{name}=$${name}"' for name in (
        "CUDA_DEVICE_ORDER", "PYTHONUNBUFFERED", "EQ_RUN_DIR", "CUDA_VISIBLE_DEVICES",
        "EQ_JOB_ID", "EQ_ATTEMPT", "EQ_PROJECT"))
    (tmp_path / "m.yaml").write_text(
        f"project: vars\ncwd: {tmp_path}\nhosts: [{{name: sim, simulate: {{gpus: 2}}}}]\n"
        f"jobs:\n  - id: show\n    cmd: 'printf \"%s\\n\" {show} > vars.txt'\n")
    run_dir = tmp_path / "run"
    result = eq(str(tmp_path / "m.yaml"), "--no-ui", "--poll", "0.3", "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stderr
    seen = dict(line.split("=", 1) for line in (tmp_path / "vars.txt").read_text().split("\n")
                if line)
    job = state(run_dir)["jobs"][0]
    assert seen == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PYTHONUNBUFFERED": "1",
                    "EQ_RUN_DIR": str(run_dir.resolve()),
                    "CUDA_VISIBLE_DEVICES": ",".join(map(str, job["gpus"])),
                    "EQ_JOB_ID": "show", "EQ_ATTEMPT": "1", "EQ_PROJECT": "vars"}


def test_fresh_archives_the_run_dir_and_runs_every_job_again(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(
        "project: fresh\nhosts: [{name: sim, simulate: {gpus: 2}}]\njobs:\n"
        "  - {id: a, cmd: 'fake-train --epochs 1 --epoch-seconds 0.1 --mem 100'}\n"
        "  - {id: b, cmd: 'fake-train --epochs 1 --epoch-seconds 0.1 --mem 100 --seed 1'}\n")
    run_dir = tmp_path / "run"
    args = (str(tmp_path / "m.yaml"), "--no-ui", "--poll", "0.3", "--run-dir", str(run_dir))
    assert eq(*args).returncode == 0
    sim = run_dir / "sim" / "sim"
    assert launches_per_job([sim]) == {"a": 1, "b": 1}
    # without --fresh: everything is done, nothing runs again
    assert eq(*args).returncode == 0
    assert launches_per_job([sim]) == {"a": 1, "b": 1}
    first_token = state(run_dir)["token"]
    again = eq(*args, "--fresh")
    assert again.returncode == 0, again.stderr
    moved = re.search(r"archived the previous run dir to (\S+)", again.stderr)
    assert moved is not None, again.stderr
    archive = Path(moved[1])
    assert archive.parent == run_dir.parent and state(archive)["token"] == first_token
    assert launches_per_job([archive / "sim" / "sim"]) == {"a": 1, "b": 1}  # left as it was
    assert state(run_dir)["token"] != first_token
    assert launches_per_job([sim]) == {"a": 1, "b": 1}  # a new run: each job once more
    assert exits([sim]) == {"a": [0], "b": [0]}


def test_a_host_that_cannot_be_reached_exits_3_naming_it(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    (tmp_path / "m.yaml").write_text(f"project: unreachable\nssh: nobody@127.0.0.1:{port}\n"
                                     "jobs:\n  - {id: a, cmd: 'true'}\n")
    result = eq(str(tmp_path / "m.yaml"), "--no-ui", "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 3
    assert f"cannot connect to nobody@127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


BED_HOSTS = [("box", 2, 24576, "Sim RTX")]


def test_a_user_at_host_port_target_needs_no_alias(bed: SshBed, bed_work: Path,
                                                   tmp_path: Path) -> None:
    host = bed.hosts["box"]
    # the ssh config names only the key and known_hosts; user and port come from the manifest
    config = tmp_path / "ssh_config"
    config.write_text(f"Host 127.0.0.1\n  IdentityFile {bed.root / 'client_key'}\n"
                      f"  UserKnownHostsFile {bed.known_hosts}\n  StrictHostKeyChecking yes\n")
    work = bed_work
    (tmp_path / "m.yaml").write_text(
        f"project: target\ncwd: {work}\nssh: {USER}@127.0.0.1:{host.port}\njobs:\n"
        "  - {id: a, cmd: 'fake-train --epochs 1 --epoch-seconds 0.1 --mem 100'}\n")
    result = eq(str(tmp_path / "m.yaml"), "--no-ui", "--poll", "0.3", "--run-dir",
                str(tmp_path / "run"), "--ssh-config", str(config))
    assert result.returncode == 0, result.stderr
    assert state(tmp_path / "run")["jobs"][0]["host"] == "127.0.0.1"
    assert exits([host.sim_state]).get("a") == [0]  # it ran there, as eqtest


def test_the_demo_ends_as_the_readme_says_and_packs_its_training_jobs_two_to_a_gpu(
        tmp_path: Path) -> None:
    """One run of the demo for both: how it ends, and the GPU sharing the README shows (from
    the hosts' own records, two training jobs held one 24 GiB GPU at once, never three, and
    none ran out of memory)."""
    # the demo's manifest with its sleeps shortened (the outcome does not depend on them; 0.5 s
    # epochs leave the training jobs that share a GPU time to overlap however loaded the box)
    text = (SAMPLES / "demo.yaml").read_text()
    text = text.replace("--epoch-seconds 1", "--epoch-seconds 0.5")
    text = text.replace("delay: 8", "delay: 1").replace("\npoll: 1\n", "\npoll: 0.5\n")
    (tmp_path / "demo.yaml").write_text(text)
    run_dir = tmp_path / "run"
    result = eq(str(tmp_path / "demo.yaml"), "--no-ui", "--run-dir", str(run_dir))
    # "so the demo ends with exit code 1 and one job that needs a person"
    assert result.returncode == 1, result.stderr
    jobs = {j["id"]: j for j in state(run_dir)["jobs"]}
    by_status: dict[str, int] = {}
    for job in jobs.values():
        by_status[job["status"]] = by_status.get(job["status"], 0) + 1
    assert by_status == {"completed": 19, "stuck": 1}
    assert jobs["student_nan"]["failure"]["class"] == "exit_nonzero"
    # from the hosts: twelve training jobs once each; the distillation jobs started after
    # every training job ended; three hit an OOM first and completed on the retry
    sims = [run_dir / "sim" / name for name in ("rtx-box", "a100-box")]
    ran = launches(sims)
    train = [j for j in jobs if j.startswith("train_")]
    assert len(train) == 12 and all(ran[(j, 1)] == 1 and (j, 2) not in ran for j in train)
    ooms = {"student_s2", "student_s4", "student_big"}
    assert {j for j in jobs if (j, 2) in ran} == ooms
    per_job = launches_per_job(sims)
    assert all(per_job[j] == (2 if j in ooms else 1) for j in jobs), per_job
    ends = exits(sims)
    assert all(ends[j][-1] == 0 for j in jobs if j != "student_nan")
    assert ends["student_nan"] == [3]
    records = [r for sim in sims for r in _runs(sim)]
    last_train_end = max(r["t"] for r in records if r["event"] == "end"
                         and str(r["job"]).startswith("train_"))
    assert all(r["t"] >= last_train_end for r in records
               if r["event"] in ("start", "oom") and str(r["job"]).startswith("student_"))
    packed_two_to_a_gpu(run_dir)


def _runs(sim: Path) -> list[dict[str, Any]]:
    from eq_tui.sim.state import read_runs

    return read_runs(sim)


def packed_two_to_a_gpu(run_dir: Path) -> None:
    from eq_tui.sim.state import run_intervals

    train = [i for i in run_intervals(_runs(run_dir / "sim" / "rtx-box"))
             if i.job.startswith("train_")]
    most = 0
    for interval in train:
        at_once = sum(1 for other in train if other.gpu == interval.gpu
                      and other.start <= interval.start < other.end)
        most = max(most, at_once)
    assert most == 2
    assert not [r for r in _runs(run_dir / "sim" / "rtx-box") if r["event"] == "oom"
                and str(r["job"]).startswith("train_")]
