"""SSH hosts against real OpenSSH servers on loopback, with simulated GPUs behind each."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eq_tui.errors import HostError
from eq_tui.hosts.base import LaunchRequest, ProbeRequest
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.hosts.ssh import SshRunner
from eq_tui.manifest.loader import load_manifest
from tests.support.engine_run import start_engine
from tests.support.ground_truth import exits, launches, launches_per_job, overlaps
from tests.support.sshbed import SshBed

pytestmark = pytest.mark.integration


BED_HOSTS = [("alpha", 2, 24576, "NVIDIA RTX 4090 (sim)"),
             ("beta", 2, 81920, "NVIDIA A100 80GB (sim)")]


def runner(bed: SshBed, name: str, **kwargs: object) -> SshRunner:
    return SshRunner(name, name, config_path=str(bed.ssh_config), connect_timeout=5,
                     **kwargs)  # type: ignore[arg-type]


async def wait_until(predicate, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_commands_see_the_hosts_own_environment_and_gpus(bed: SshBed) -> None:
    alpha = runner(bed, "alpha")
    try:
        result = await alpha.run('printf "%s|%s" "$EQ_FAKE_HOST" "$(whoami)"')
        assert result.stdout == b"alpha|eqtest"
        host = ShellHost("alpha", alpha)
        snap = await host.probe(ProbeRequest())
        assert snap.ok, snap.error
        assert [g.name for g in snap.gpus] == ["NVIDIA RTX 4090 (sim)"] * 2
        assert (await host.log_root("p", "tok")).startswith("/home/eqtest/.eq-tui/p-tok")
    finally:
        await alpha.close()


async def test_arguments_and_stdin_arrive_verbatim_and_nothing_runs(bed: SshBed) -> None:
    alpha = runner(bed, "alpha")
    nasty = ["; touch /tmp/pwned-ssh", "$(touch /tmp/pwned-ssh2)", "`touch /tmp/pwned-ssh3`",
             "it's \"x\"", "two\nlines", "--flag"]
    try:
        result = await alpha.run('for a in "$@"; do printf "%s\\0" "$a"; done; cat',
                                 nasty, stdin=b"stdin bytes\x00\xff")
        parts = result.stdout.split(b"\0")
        assert [p.decode() for p in parts[:len(nasty)]] == nasty
        assert parts[len(nasty)] == b"stdin bytes" and parts[-1] == b"\xff"
        assert not any(Path(f"/tmp/pwned-ssh{s}").exists() for s in ("", "2", "3"))
    finally:
        await alpha.close()


async def test_one_connection_many_concurrent_channels(bed: SshBed) -> None:
    alpha = runner(bed, "alpha", max_channels=4)
    try:
        results = await asyncio.gather(*(alpha.run(f"echo {i}") for i in range(30)))
        assert [r.stdout for r in results] == [f"{i}\n".encode() for i in range(30)]
        assert alpha.connections_made == 1
    finally:
        await alpha.close()


async def test_unknown_and_changed_host_keys_are_refused_with_advice(bed: SshBed,
                                                                      tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(bed.ssh_config.read_text().replace(str(bed.known_hosts),
                                                         str(tmp_path / "empty_known_hosts")))
    (tmp_path / "empty_known_hosts").write_text("")
    unknown = SshRunner("alpha", "alpha", config_path=str(config))
    try:
        with pytest.raises(HostError, match=r"not trusted.*ssh-keyscan -p"):
            await unknown.run("true")
        assert unknown.link.state == "refused"
    finally:
        await unknown.close()


async def test_down_host_fails_fast_and_reconnects(bed: SshBed) -> None:
    beta = runner(bed, "beta")
    try:
        assert (await beta.run("echo up")).stdout == b"up\n"
        assert beta.link.state == "up"
        bed.take_down("beta")
        await wait_until(lambda: beta.link.state == "down")
        with pytest.raises(HostError, match=r"down|lost|cannot connect"):
            await asyncio.wait_for(beta.run("true"), 5)
        bed.start("beta")
        await wait_until(lambda: beta.link.state == "up", timeout=30)
        assert (await beta.run("echo back")).stdout == b"back\n"
    finally:
        await beta.close()


MANIFEST = """\
project: sshsweep
cwd: {work}
hosts:
  - {{name: alpha, ssh: alpha, log_dir: {work}/logs}}
  - {{name: beta, ssh: beta, log_dir: {work}/logs}}
oom_retry: {{delay: 0.3, max_attempts: 3}}
stale_grace_s: 1
phases:
  - name: train
    grid: {{seed: [1, 2, 3, 4, 5, 6]}}
    template:
      id: "train_s${{seed}}"
      cmd: "fake-train --epochs {epochs} --epoch-seconds 0.2 --mem 4000
            --oom-attempts {oom} --output out/${{JOB_ID}}.json"
      output_check: "out/${{JOB_ID}}.json"
  - name: eval
    depends_on: train
    jobs:
      - id: eval_all
        cmd: "fake-train --epochs 1 --epoch-seconds 0.1 --mem 1000 --output out/eval.json"
        output_check: out/eval.json
"""


def write_manifest(bed: SshBed, tmp_path: Path, *, epochs: int, oom: str) -> Path:
    work = bed.work / tmp_path.name  # each test its own outputs
    work.mkdir()
    shutil.chown(work, "eqtest", "eqtest")
    path = tmp_path / "sweep.yaml"
    path.write_text(MANIFEST.format(work=work, epochs=epochs, oom=oom))
    return path


async def test_two_hosts_run_a_phased_sweep_with_one_probe_per_host_per_tick(
        bed: SshBed, tmp_path: Path) -> None:
    manifest = load_manifest(write_manifest(bed, tmp_path, epochs=3, oom="1"))
    before = {name: len(host.commands("probe.sh")) for name, host in bed.hosts.items()}
    began = time.time()
    run = await start_engine(manifest, tmp_path / "run", poll=0.3,
                             ssh_config=str(bed.ssh_config))
    assert run.task is not None
    code = await asyncio.wait_for(run.task, 120)
    assert code == 0
    jobs = {j["id"]: j for j in run.state["jobs"]}
    assert all(j["status"] == "completed" for j in jobs.values())
    assert {j["host"] for j in jobs.values()} == {"alpha", "beta"}
    assert all(j["attempts"] == 2 for j in jobs.values() if j["id"].startswith("train"))
    assert all(a["failure_class"] == "cuda_oom" for j in jobs.values()
               if j["id"].startswith("train") for a in j["history"][:1])
    # server-side count: exactly one probe command per host per tick, whatever the job count
    for name, host in bed.hosts.items():
        assert len(host.commands("probe.sh")) - before[name] == run.engine.probes_by_host[name]
    # from the hosts: each train job's first attempt was refused its memory (OOM) and its
    # second ran, each once; eval ran once
    sims = [host.sim_state for host in bed.hosts.values()]
    expected = {(f"train_s{i}", n): 1 for i in range(1, 7) for n in (1, 2)}
    assert launches(sims, since=began, jobs=set(jobs)) == {**expected, ("eval_all", 1): 1}
    assert all(overlaps(sim) == [] for sim in sims)


async def test_a_host_that_goes_down_keeps_its_jobs_and_is_reconciled(
        bed: SshBed, tmp_path: Path) -> None:
    manifest = load_manifest(write_manifest(bed, tmp_path, epochs=15, oom="0"))
    began = time.time()
    run = await start_engine(manifest, tmp_path / "run", poll=0.3,
                             ssh_config=str(bed.ssh_config))
    try:
        await run.wait_for(lambda: any(j.host == "beta" and str(j.status) == "running"
                                       for j in run.engine.jobs.values()), timeout=60)
        on_beta = {j.id for j in run.engine.jobs.values()
                   if j.host == "beta" and str(j.status) == "running"}
        bed.take_down("beta")
        await run.wait_for(lambda: run.engine.ctx.hosts["beta"].link.state == "down", timeout=30)
        # alpha keeps launching; beta's jobs stay running (they live in sessions there)
        await run.wait_for(lambda: any(j.host == "alpha" and len(j.history) >= 1 and
                                       j.id not in on_beta and str(j.status) == "completed"
                                       for j in run.engine.jobs.values()), timeout=60)
        assert all(str(run.engine.jobs[j].status) in ("running", "completed") for j in on_beta)
        assert all(run.engine.jobs[j].host == "beta" for j in on_beta)
        bed.start("beta")
        assert run.task is not None
        code = await asyncio.wait_for(asyncio.shield(run.task), 120)
        assert code == 0
    finally:
        await run.stop()
    state = json.loads((tmp_path / "run" / "queue_state.json").read_text())
    # from the hosts: every job's process reached a GPU exactly once, wherever it ran, and
    # exited 0 there (beta's jobs were adopted after the outage, not started again)
    ids = {j["id"] for j in state["jobs"]}
    sims = [host.sim_state for host in bed.hosts.values()]
    assert launches_per_job(sims, since=began, jobs=ids) == dict.fromkeys(ids, 1)
    assert {job: codes for job, codes in exits(sims, since=began).items() if job in ids} \
        == {job: [0] for job in ids}
    assert all(overlaps(sim) == [] for sim in sims)
    assert all(j["status"] == "completed" for j in state["jobs"])


ONE_JOB = """\
project: {project}
cwd: {work}
hosts: [{{name: alpha, ssh: alpha, log_dir: {work}/logs}}]
jobs: [{{id: one, cmd: "fake-train --epochs 1 --epoch-seconds 0.1 --mem 100"}}]
"""


def one_job_manifest(bed: SshBed, tmp_path: Path, project: str) -> Path:
    work = bed.work / tmp_path.name
    work.mkdir()
    shutil.chown(work, "eqtest", "eqtest")
    path = tmp_path / "one.yaml"
    path.write_text(ONE_JOB.format(project=project, work=work))
    return path


def eq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "eq_tui", *args], capture_output=True,
                          text=True, timeout=120)


def test_ssh_config_reaches_the_hosts_of_a_dry_run(bed: SshBed, tmp_path: Path) -> None:
    # `alpha` is an alias only the bed's ssh config knows: no config, no connection
    result = eq(str(one_job_manifest(bed, tmp_path, "sshdry")), "--dry-run",
                "--ssh-config", str(bed.ssh_config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok   alpha: connection" in result.stdout


def test_ssh_config_reaches_a_detached_engine(bed: SshBed, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    started = eq(str(one_job_manifest(bed, tmp_path, "sshdetach")), "--detach", "--poll", "0.3",
                 "--run-dir", str(run_dir), "--ssh-config", str(bed.ssh_config))
    assert started.returncode == 0, started.stderr
    try:
        deadline = time.monotonic() + 60
        while json.loads(eq("status", str(run_dir), "--json").stdout)["counts"] \
                != {"completed": 1}:
            assert time.monotonic() < deadline, eq("status", str(run_dir)).stdout
            time.sleep(0.2)
    finally:
        eq("stop", str(run_dir))


async def test_preflight_names_the_host_and_what_is_missing(bed: SshBed) -> None:
    from eq_tui.hosts.base import PreflightRequest

    alpha = ShellHost("alpha", runner(bed, "alpha"))
    try:
        findings = await alpha.preflight(PreflightRequest(
            cwd="/nonexistent/dir", conda="no_such_env", conda_hook=None, launcher="screen"))
        by_check = {f.check: f for f in findings}
        assert by_check["connection"].ok and by_check["launcher"].ok
        assert by_check["nvidia-smi"].ok and "2 GPU" in by_check["nvidia-smi"].detail
        assert not by_check["cwd"].ok and "/nonexistent/dir" in by_check["cwd"].detail
        assert not by_check["conda"].ok
        assert all(f.host == "alpha" for f in findings)
        missing = await alpha.preflight(PreflightRequest(cwd=None, conda=None, conda_hook=None,
                                                         launcher="byobu"))  # type: ignore[arg-type]
        assert not {f.check: f for f in missing}["launcher"].ok
    finally:
        await alpha.close()


async def test_launch_over_ssh_quotes_everything(bed: SshBed) -> None:
    alpha = ShellHost("alpha", runner(bed, "alpha"))
    try:
        root = await alpha.log_root("inj", secrets.token_hex(3))
        request = LaunchRequest(
            job_id="inj", attempt=1, session="eq_inj_t1_inj_a1", attempt_dir=f"{root}/inj/a1",
            cwd=str(bed.work), cmd='printf "%s" "$V" > out_inj.txt', gpus=(0,),
            env={"V": "; touch pwned $(id) `id` 'q' \"dq\""}, conda=None, conda_hook=None,
            launcher="screen")
        await alpha.launch(request)
        await wait_until(lambda: (bed.work / "out_inj.txt").exists()
                         and (bed.work / "out_inj.txt").read_text() != "")
        assert (bed.work / "out_inj.txt").read_text() == request.env["V"]
        assert not (bed.work / "pwned").exists()
    finally:
        await alpha.close()


async def test_a_changed_host_key_is_refused() -> None:
    lone = SshBed.create([("gamma", 1, 8192, "Sim")])
    try:
        first = runner(lone, "gamma")
        assert (await first.run("echo ok")).stdout == b"ok\n"
        await first.close()
        lone.rotate_host_key("gamma")  # known_hosts still has the old key
        second = runner(lone, "gamma")
        try:
            with pytest.raises(HostError, match=r"not trusted.*ssh-keygen -R"):
                await second.run("true")
            assert second.link.state == "refused"
        finally:
            await second.close()
    finally:
        lone.close()
