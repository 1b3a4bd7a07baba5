"""The chaos suite: a sweep on real sshd hosts while the engine, the network and the hosts fail.

    .venv/bin/python -m tests.chaos.chaos --json           # the long run: 240 jobs
    .venv/bin/python -m tests.chaos.chaos --jobs 40 --faults short --seed 210   # the suite's

Fake jobs OOM (once, or always), fail for other reasons, leave stale sessions and linger memory
(0.5 s after exit). While the queue runs the driver kills the engine with SIGKILL and restarts
it, takes a host off the network (connections cut, sshd stopped) and brings it back, reboots a
host (its sessions vanish), fills a host's log disk (a tiny tmpfs) until a record of ours on it
is refused, and truncates the state file between two restarts (recovered from the previous good
copy, as the error message says), sends a clone from the shell as the engine is killed (sent
again with its command id, it must run once), and starts a second engine of another login user
on the same hosts (its jobs allocate their memory 2 s after they start: until then only their
claims say the GPU is taken). Each fault is injected while jobs of ours run (on the host it
hits), at jittered gaps, in an order and on hosts drawn from the seed (tests/chaos/schedule.py):
the seed, printed at the start and in the verdict, replays the schedule and the jobs. What each
fault left on the hosts or the disk (the OS's reaping of a killed engine and engine.lock, the
state files, the processes a reboot killed) is read as it happens; the rest (sshd's log, the
attempt records on a log disk, runs.jsonl) at the check.

The verdict (tests/chaos/verdict.py) comes from the hosts: the fake jobs' own start/end records
(runs.jsonl), the outputs they wrote and the processes left alive. A start before the previous
holder's memory was released is an overlap; a job the state file calls completed needs an exit-0
run and its output on a host; a start with no end record ended at the reboot that killed it, or
holds its GPU until the check; a fault counts as effective only if it left a trace on the hosts
(tests/chaos/traces.py: a run or wrapper the reboot killed, a live connection the cut host's
sshd dropped, an attempt record the full disk refused, the killed engine reaped by SIGKILL and
its lock taken over, the truncated state file refused and the good copy carried on, the second
engine's runs), never in the engine's events; jobs a fault left stuck are retried by hand, and
each must be explained by an effective fault on its host (at most one per GPU of that host per
fault).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from eq_tui.sim.state import read_runs
from tests.chaos.checkpoints import (
    CONTRACT,
    SAVE_FLAGS,
    final_metric_mismatches,
    judge_resumes,
)
from tests.chaos.host_records import (
    lock_holder,
    refused_writes,
    sshd_log,
    state_summary,
    wait_lock_holder,
    wait_state_past,
)
from tests.chaos.schedule import PlannedFault, fault_schedule
from tests.chaos.traces import HostRecords, attempts_of, fault_trace
from tests.chaos.verdict import (
    FAULT_CLASSES,
    EngineKill,
    Fault,
    Run,
    StateRecovery,
    Verdict,
    completed_proof,
    double_bookings,
    duplicates,
    explain_retries,
    gpu_overlaps,
    host_runs,
    read_events,
    read_output,
    rerun_explained,
    stuck_proof,
)
from tests.support.sshbed import OTHER_USER, USER, SshBed

EQ = [sys.executable, "-m", "eq_tui"]
BEHAVIOURS = (("ok", 60), ("oom_once", 15), ("oom_always", 5), ("fails", 6), ("stale", 6),
              ("slow", 8))
GPUS_PER_HOST = 4
GPU_MIB = 24576
PACKED_MIB = 7000  # what a packed job declares (it uses 6000)
HUNG_STALL_S = 3  # a hung job's stall_after: then it is restarted
# The evidence each plan's verdict needs: faults that took effect, and of how many kinds.
EVIDENCE = {"short": (6, 4), "long": (10, 5)}
SHORT_PLAN = ["kill9", "second_engine", "cut_host", "kill9", "reboot", "corrupt_state",
              "kill9", "disk_full", "command_kill9", "cut_host", "kill9"]
SECOND_ENGINE_JOBS = 8
SECOND_ENGINE = "intruder"  # its project: "intruder<N>", its jobs "intruder<N>-<i>"


def command_for(behaviour: str, rng: random.Random) -> str:
    epochs = rng.randint(2, 5)
    base = f"fake-train --epochs {epochs} --epoch-seconds 0.3 --mem {rng.choice([3000, 6000])}"
    out = "--output out/${JOB_ID}.json"
    return {
        "ok": f"{base} {out}",
        "oom_once": f"{base} --oom-attempts 1 {out}",
        "oom_always": f"{base} --oom-attempts 99 {out}",
        "fails": f"{base} --exit-code 3",
        "stale": f"{base} --stale-child --stale-child-seconds 600 {out}",
        "slow": f"fake-train --epochs 20 --epoch-seconds 0.4 --mem 2000 {out}",
        # packed: declares mem_mib, so several share a GPU (6000 MiB used of 7000 declared)
        "packed": f"fake-train --epochs {epochs} --epoch-seconds 0.3 --mem 6000 {out}",
        "multi": f"{base} {out}",  # gpus_per_job: 2
        # hangs after its first epoch on its first attempt; stall_after restarts it
        "hung": f"fake-train --epochs 3 --epoch-seconds 0.3 --mem 3000 --hang-after 1 "
                f"--hang-attempts 1 {out}",
    }[behaviour]


def expected_status(behaviour: str) -> tuple[str, str | None]:
    return {"oom_always": ("stuck", "cuda_oom"), "fails": ("stuck", "exit_nonzero")}.get(
        behaviour, ("completed", None))


def write_manifest(bed: SshBed, work: Path, path: Path, n_jobs: int, seed: int,
                   cmds: dict[str, str] | None = None) -> dict[str, str]:
    """The queue: its jobs' behaviours (job -> behaviour); their commands into `cmds`."""
    rng = random.Random(seed)
    names, weights = zip(*BEHAVIOURS, strict=True)
    behaviours = {f"job{i:03d}": rng.choices(names, weights)[0] for i in range(n_jobs)}
    for i in range(n_jobs):  # every tenth job packed; every twentieth on two GPUs, one hangs
        if i % 10 == 3:
            behaviours[f"job{i:03d}"] = "packed"
        elif i % 20 == 7:
            behaviours[f"job{i:03d}"] = "multi"
        elif i % 20 == 15:
            behaviours[f"job{i:03d}"] = "hung"
    lines = [f"project: chaos\ncwd: {work}\nstale_grace_s: 2\nretry_delay_s: 2",
             "oom_retry: {delay: 1, max_attempts: 3}", CONTRACT, "hosts:"]
    for name in bed.hosts:
        lines.append(f"  - {{name: {name}, ssh: {name}, log_dir: {work}/logs-{name}}}")
    lines.append("jobs:")
    for i, (job_id, behaviour) in enumerate(behaviours.items()):
        check = "" if behaviour in ("fails",) else ", output_check: 'out/${JOB_ID}.json'"
        shape = {"packed": f", mem_mib: {PACKED_MIB}", "multi": ", gpus_per_job: 2",
                 "hung": f", stall_after: {HUNG_STALL_S}s, on_stall: restart"}.get(behaviour, "")
        cmd = f"{command_for(behaviour, rng)} {SAVE_FLAGS} --seed {i}"  # alike jobs: seeds
        if behaviour == "oom_once" and i % 2:  # half of them run out at a step: resumed
            cmd += " --oom-after 1"
        if cmds is not None:
            cmds[job_id] = cmd
        lines.append(f"  - {{id: {job_id}, cmd: {json.dumps(cmd)}{check}{shape}}}")
    path.write_text("\n".join(lines) + "\n")
    return behaviours


class Driver:
    def __init__(self, bed: SshBed, manifest: Path, run_dir: Path, poll: float) -> None:
        self.bed = bed
        self.manifest = manifest
        self.run_dir = run_dir
        self.poll = poll
        self.engine: subprocess.Popen[bytes] | None = None
        self.log = open(run_dir.parent / "engine-output.log", "ab")  # noqa: SIM115
        self.second: list[subprocess.Popen[bytes]] = []  # other users' engines (second_engine)

    def start_engine(self) -> None:
        self.engine = subprocess.Popen(
            [*EQ, str(self.manifest), "--no-ui", "--run-dir", str(self.run_dir), "--poll",
             str(self.poll), "--ssh-config", str(self.bed.ssh_config)],
            stdout=self.log, stderr=self.log)

    def state(self) -> dict[str, Any] | None:
        with contextlib.suppress(OSError, ValueError):
            data: dict[str, Any] = json.loads((self.run_dir / "queue_state.json").read_text())
            return data
        return None

    def counts(self) -> Counter[str]:
        state = self.state()
        return Counter(j["status"] for j in state["jobs"]) if state else Counter()

    def kill_engine(self) -> tuple[int, int | None, str]:
        """SIGKILL the engine: its pid, how the OS reaped it, and engine.lock as it left it."""
        assert self.engine is not None
        self.engine.send_signal(signal.SIGKILL)
        status = self.engine.wait()
        return self.engine.pid, status, lock_holder(self.run_dir)

    def restart(self, killed: tuple[int, int | None, str]) -> EngineKill:
        """Start the next engine after `killed` (kill_engine's answer), until it holds the lock."""
        self.start_engine()
        assert self.engine is not None
        successor = self.engine.pid
        return EngineKill(killed[1], killed[2], successor,
                          wait_lock_holder(self.run_dir, successor))

    def finished(self) -> bool:
        return self.engine is not None and self.engine.poll() is not None


def mount_log_disks(bed: SshBed, work: Path) -> list[Path]:
    """Each host's logs live on their own small disk (a tmpfs), so one can fill up."""
    mounts = []
    for name in bed.hosts:
        logs = work / f"logs-{name}"
        logs.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m,mode=0777", "tmpfs", str(logs)],
                       check=True)
        shutil.chown(logs, USER, USER)
        mounts.append(logs)
    return mounts


def fill_disk(work: Path, host: str) -> Path:
    """Fill the host's log disk to the last byte, as a runaway job would."""
    filler = work / f"logs-{host}" / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as out:
        chunk = b"\0" * (1 << 20)
        while True:
            out.write(chunk)
            out.flush()
    return filler


def free_disk(filler: Path) -> None:
    filler.unlink(missing_ok=True)


def unmount(mounts: list[Path]) -> None:
    for mount in mounts:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)



def in_flight(bed: SshBed) -> Counter[str]:
    """Runs of ours alive now, per host, from the hosts' own start/end records (a start with no
    end whose process is gone, killed by a reboot, is not alive)."""
    alive: Counter[str] = Counter()
    for name, host in bed.hosts.items():
        open_keys: set[tuple[Any, ...]] = set()
        for rec in read_runs(host.sim_state):
            if str(rec.get("job", "")).startswith(SECOND_ENGINE):
                continue
            key = (rec.get("pid"), rec.get("job"), rec.get("attempt"))
            if rec.get("event") == "start":
                open_keys.add(key)
            elif rec.get("event") == "end":
                open_keys.discard(key)
        alive[name] = sum(1 for key in open_keys if pid_alive(key[0]))
    return alive


def pid_alive(pid: object) -> bool:
    """The bed's hosts are loopback: a run's pid is a process of this machine."""
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process, alive
    return True


def wait_gap(driver: Driver, bed: SshBed, gap_s: float, work_s: float = 120) -> bool:
    """Wait the fault's drawn gap, then until runs of ours are alive (up to `work_s`: an engine
    that has just recovered from a fault on a loaded box may take a while to launch again), so
    that the fault meets something to break. False: still no run of ours alive (the fault
    would meet nothing; the verdict counts it as idle and fails)."""
    due = time.monotonic() + gap_s
    while not driver.finished() and (left := due - time.monotonic()) > 0:
        time.sleep(min(left, 0.05))  # the gap itself is the point: it places the fault
    deadline = due + work_s
    while not driver.finished() and time.monotonic() < deadline:
        if sum(in_flight(bed).values()):
            return True
        time.sleep(0.1)  # a harness poll, not a test's wait before an assertion
    return bool(sum(in_flight(bed).values()))


def target_host(bed: SshBed, planned: PlannedFault) -> str:
    """The planned host while a run of ours is alive there, else one where one is."""
    alive = in_flight(bed)
    busy = sorted(name for name, n in alive.items() if n)
    return planned.host if planned.host in busy or not busy else busy[0]


def wait_disk_trace(log_dir: Path, since: float, timeout: float = 15) -> None:
    """Keep the disk full until a record of ours on it was refused (or the timeout: then the
    fault had no effect and does not count)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not refused_writes(log_dir, since):
        time.sleep(0.2)


def start_second_engine(driver: Driver, bed: SshBed, n: int) -> str:
    """Another login user's engine on the same hosts, mid-run: its own project and jobs, whose
    memory shows only 2 s after they start."""
    project = f"{SECOND_ENGINE}{n}"
    lines = [f"project: {project}", "hosts:"]
    lines += [f"  - {{name: {name}, ssh: {bed.alias(name, OTHER_USER)}}}" for name in bed.hosts]
    lines.append("jobs:")
    cmd = "sleep 2; fake-train --epochs 3 --epoch-seconds 0.4 --mem 3000"
    lines += [f"  - {{id: {project}-{i:02d}, cmd: {json.dumps(f'{cmd} --seed {i}')}}}"
              for i in range(SECOND_ENGINE_JOBS)]
    manifest = driver.run_dir.parent / f"{project}.yaml"
    manifest.write_text("\n".join(lines) + "\n")
    driver.second.append(subprocess.Popen(
        [*EQ, str(manifest), "--no-ui", "--run-dir", str(driver.run_dir.parent / project),
         "--poll", str(driver.poll), "--ssh-config", str(bed.ssh_config)],
        stdout=driver.log, stderr=driver.log))
    return project


def inject(planned: PlannedFault, driver: Driver, bed: SshBed, work: Path) -> Fault:
    fault = planned.kind
    host = target_host(bed, planned)
    t0 = time.time()
    if fault == "kill9":
        killed = driver.kill_engine()
        took_over = driver.restart(killed)
        return Fault(fault, None, t0, time.time(), pid=killed[0], kill=took_over)
    if fault == "cut_host":
        bed.take_down(host)
        time.sleep(planned.hold_s)
        bed.start(host)
        return Fault(fault, host, t0, time.time())
    if fault == "reboot":
        killed_at, processes = bed.reboot(host)
        return Fault(fault, host, killed_at, time.time(),
                     sessions_killed=attempts_of(processes))
    if fault == "corrupt_state":
        return corrupt_state(driver, t0)
    if fault == "second_engine":
        project = start_second_engine(driver, bed, len(driver.second))
        return Fault(fault, None, t0, time.time(), engine=project)
    if fault == "disk_full":
        filler = fill_disk(work, host)
        wait_disk_trace(work / f"logs-{host}", t0)
        free_disk(filler)
        return Fault(fault, host, t0, time.time())
    raise ValueError(fault)


def corrupt_state(driver: Driver, t0: float) -> Fault:
    """Truncate the state file between two engines; the one started on it must refuse it
    (leaving it as it is); the previous good copy is put back, as its message says, and the
    next engine must carry on from that copy."""
    driver.kill_engine()
    state_file = driver.run_dir / "queue_state.json"
    previous = driver.run_dir / "queue_state.prev.json"
    state_file.write_text(state_file.read_text()[:200])
    driver.start_engine()
    assert driver.engine is not None
    driver.engine.wait(timeout=60)
    parses_after = state_summary(state_file) is not None
    good = state_summary(previous)
    shutil.copy(previous, state_file)  # as it advises
    driver.start_engine()
    recovered = wait_state_past(state_file, good[0]) if good else None
    return Fault("corrupt_state", None, t0, time.time(), recovery=StateRecovery(
        parses_after, good[0] if good else None, good[1] if good else frozenset(),
        recovered[0] if recovered else None, recovered[1] if recovered else frozenset()))


def command_while_killed(driver: Driver, behaviours: dict[str, str], n: int,
                         lead_s: float) -> tuple[str, Fault]:
    """A clone sent from the shell as the engine is killed with SIGKILL: it may or may not
    have arrived. Sent again with its id while no engine runs (exit 3: --no-start, the driver
    restarts the engine itself), then to the restarted engine: applied once either way (the
    check counts the clone's runs on the hosts). Returns the clone and the kill."""
    t0 = time.time()
    source = next(job_id for job_id, b in behaviours.items() if b == "ok")
    clone = f"{source}-chaos{n}"
    verb = [*EQ, "clone", str(driver.run_dir), source, "--id", clone, "--command-id",
            f"chaos-{n}", "--no-start"]
    sent = subprocess.Popen(verb, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(lead_s)
    killed = driver.kill_engine()
    first = sent.wait(timeout=120)
    assert first in (0, 3), f"clone while killed: exit {first}"
    nobody = subprocess.run(verb, capture_output=True, timeout=120)
    assert nobody.returncode == 3, nobody.stderr
    took_over = driver.restart(killed)
    deadline = time.monotonic() + 60
    while True:
        again = subprocess.run(verb, capture_output=True, text=True, timeout=120)
        if again.returncode != 3 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert again.returncode == 0, again.stderr
    if first == 0:
        assert "had arrived already" in again.stdout, again.stdout
    return clone, Fault("kill9", None, t0, time.time(), pid=killed[0], kill=took_over)



class RunStopped(Exception):
    """The queue cannot finish by itself: a phase waits for a person, or time ran out."""


def wait_to_end(driver: Driver, timeout: float) -> None:
    """Until the engine exits; a phase the crash guard held (the queue then waits for a person
    for good) or the timeout stops the run at once, naming why, instead of waiting."""
    deadline = time.monotonic() + timeout
    while not driver.finished():
        state = driver.state() or {}
        held = (state.get("crash_guard") or {}).get("held") or {}
        if held:
            raise RunStopped("the crash guard held " + "; ".join(
                f"phase {phase}: {why}" for phase, why in held.items()))
        if time.monotonic() > deadline:
            raise RunStopped(f"the queue did not finish in {timeout:g}s: {dict(driver.counts())}")
        time.sleep(0.5)  # a harness poll, not a test's wait before an assertion


def run(n_jobs: int, faults: str, seed: int, keep: bool = False) -> Verdict:
    started = time.monotonic()
    bed = SshBed.create([("alpha", GPUS_PER_HOST, GPU_MIB, "NVIDIA RTX 4090 (sim)"),
                         ("beta", GPUS_PER_HOST, GPU_MIB, "NVIDIA L4 (sim)")],
                        users=(USER, OTHER_USER))
    for host in bed.hosts.values():
        config = json.loads((host.sim_state / "config.json").read_text())
        config["linger_s"] = 0.5
        (host.sim_state / "config.json").write_text(json.dumps(config))
    work = bed.work / "chaos"
    work.mkdir()
    shutil.chown(work, USER, USER)
    mounts = mount_log_disks(bed, work)
    root = Path(f"/tmp/eqchaos-{os.getpid()}")
    root.mkdir(exist_ok=True)
    manifest = root / "chaos.yaml"
    cmds: dict[str, str] = {}
    behaviours = write_manifest(bed, work, manifest, n_jobs, seed, cmds)
    run_dir = root / "run"
    driver = Driver(bed, manifest, run_dir, poll=0.5)
    plan = fault_schedule(seed, SHORT_PLAN * (2 if faults == "long" else 1), list(bed.hosts))
    say(f"seed {seed} (replay: --jobs {n_jobs} --faults {faults} --seed {seed}); faults: "
        + ", ".join(planned.describe() for planned in plan))
    injected: list[Fault] = []
    idle: list[str] = []
    try:
        driver.start_engine()
        for planned in plan:
            waited = time.monotonic()
            working = wait_gap(driver, bed, planned.gap_s)
            began = time.monotonic()
            if driver.finished():
                break
            if not working:
                idle.append(f"{planned.kind} injected while no job of ours ran")
            if planned.kind == "command_kill9":  # an engine kill with a command in flight
                clone, fault = command_while_killed(driver, behaviours, len(injected),
                                                    planned.hold_s)
                behaviours[clone] = "ok"
                cmds[clone] = cmds[clone.rsplit("-chaos", 1)[0]]
                injected.append(fault)
            else:
                injected.append(inject(planned, driver, bed, work))
            say(f"fault {len(injected)}/{len(plan)} {planned.kind} on "
                f"{injected[-1].host or 'the engine'} at +{began - started:.1f}s, "
                f"{began - waited:.1f}s after the previous (gap {planned.gap_s:.2f}s), "
                f"lasted {time.monotonic() - began:.1f}s")
        assert driver.engine is not None
        wait_to_end(driver, timeout=600)
        for second in driver.second:  # the other users' queues end too (a fault may leave
            second.wait(timeout=300)  # one of theirs stuck: not ours to retry)
        victims = retry_fault_victims(manifest, run_dir, bed)
        verdict = check(driver, bed, behaviours, injected, victims, work, cmds)
        verdict.min_effective, verdict.min_kinds = EVIDENCE[faults]
        verdict.seed = seed
        verdict.idle_faults = len(idle)
        verdict.details += idle
        if len(injected) < len(plan):
            verdict.details.append(f"the queue ended after {len(injected)} of {len(plan)} "
                                   "faults")
        verdict.wall_s = time.monotonic() - started
    finally:
        driver.log.close()
        if driver.engine is not None and driver.engine.poll() is None:
            driver.kill_engine()
        for second in driver.second:
            if second.poll() is None:
                second.kill()
                second.wait()
        if not keep:
            unmount(mounts)
            bed.close()
            shutil.rmtree(root, ignore_errors=True)
    return verdict


def log_refused(log: str | None) -> bool:
    """A failed attempt's log is empty on its host: every fake job prints before it ends (its
    epochs, its error or its CUDA OOM), so its bytes were refused by a full disk, and what
    the engine read of its failure (an OOM taken for another error) is not the job's doing."""
    try:
        return log is not None and Path(log).stat().st_size == 0
    except OSError:
        return False


def retry_fault_victims(manifest: Path, run_dir: Path,
                        bed: SshBed) -> dict[str, tuple[str, str | None, float]]:
    """What a person does after the faults: resume launching and retry the jobs that a fault
    (not their own behaviour) left stuck; the engine then finishes them. Returns them (job ->
    failure class, host, when it got stuck, from events.jsonl) for the verdict to explain."""
    import asyncio

    from eq_tui.engine.engine import Engine
    from eq_tui.hosts.factory import make_hosts
    from eq_tui.manifest.loader import load_manifest

    stuck_at: dict[str, tuple[str | None, float]] = {}
    for event in read_events(run_dir / "events.jsonl"):
        if event.get("type") == "job_state_changed" and event.get("new") == "stuck":
            stuck_at[str(event["job"])] = (event.get("host"), float(event["at"]))

    async def go() -> dict[str, tuple[str, str | None, float]]:
        loaded = load_manifest(manifest)
        hosts = make_hosts(loaded, run_dir, ssh_config=str(bed.ssh_config))
        engine = Engine(loaded, run_dir, hosts, poll=0.5, exit_when_done=True)
        await engine.start()
        victims = {j.id: (str(j.failure.cls), *stuck_at.get(j.id, (j.host, 0.0)))
                   for j in engine.jobs.values() if str(j.status) == "stuck"
                   and j.failure is not None and (j.failure.cls in FAULT_CLASSES
                                                  or log_refused(j.log))}
        await engine.command("resume")
        if victims:
            await engine.command("retry", sorted(victims))
        await asyncio.wait_for(engine.run(), 600)
        return victims

    return asyncio.run(go())


def check(driver: Driver, bed: SshBed, behaviours: dict[str, str], injected: list[Fault],
          victims: dict[str, tuple[str, str | None, float]], work: Path,
          cmds: dict[str, str]) -> Verdict:
    verdict = Verdict(jobs=len(behaviours))
    now = time.time()
    reboots: dict[str, list[float]] = {}
    for fault in injected:
        verdict.faults[fault.kind] += 1
        if fault.kind == "reboot" and fault.host:
            reboots.setdefault(fault.host, []).append(fault.t0)
    runs: list[Run] = []
    recorded = {name: read_runs(host.sim_state) for name, host in bed.hosts.items()}
    for name in bed.hosts:
        runs += host_runs(name, recorded[name], reboots.get(name, []), now)
    records = HostRecords(runs, {name: sshd_log(host.dir) for name, host in bed.hosts.items()},
                          {name: refused_writes(work / f"logs-{name}") for name in bed.hosts})
    effective = []
    for fault in injected:
        trace = fault_trace(fault, records)
        if trace:
            verdict.faults_effective[fault.kind] += 1
            verdict.traces.append(f"{fault.kind} at {fault.t0:.1f}: {trace}")
            effective.append(fault)
        else:
            verdict.details.append(f"no trace of {fault.kind} on {fault.host} at {fault.t0:.1f}")
    verdict.launches = len({(r.host, r.pid, r.job, r.attempt) for r in runs})
    def exit_recorded(run: Run) -> bool:
        return any(path.stat().st_size > 0 for path in
                   (work / f"logs-{run.host}").glob(f"*/{run.job}/a{run.attempt}/exit"))

    found = duplicates(runs, rerun_excuse=lambda run: rerun_explained(run, effective,
                                                                      exit_recorded))
    verdict.duplicate_launches = len([f for f in found if "explained by" not in f])
    verdict.reruns_explained = len(found) - verdict.duplicate_launches
    verdict.details += found
    packed = frozenset(job for job, b in behaviours.items() if b == "packed")
    capacity = {name: GPU_MIB for name in bed.hosts}
    found, verdict.min_release_margin_s = gpu_overlaps(runs, released=True, packed=packed,
                                                       capacity_mib=capacity)
    verdict.overlaps_released = len(found)
    verdict.details += found
    verdict.overlaps_exit = len(gpu_overlaps(runs, released=False, packed=packed,
                                             capacity_mib=capacity)[0])
    verdict.packed_jobs = len(packed)
    verdict.second_engine_runs = len({(r.host, r.pid) for r in runs
                                      if r.job.startswith(SECOND_ENGINE)})
    found = double_bookings(runs, lambda job: job.split("-")[0]
                            if job.startswith(SECOND_ENGINE) else "chaos", packed)
    verdict.double_bookings = len(found)
    verdict.details += found
    verdict.multi_gpu_jobs = sum(1 for b in behaviours.values() if b == "multi")
    verdict.hung_jobs = sum(1 for b in behaviours.values() if b == "hung")
    for job_id, behaviour in behaviours.items():
        # a hung first attempt that reached a host must be followed by another attempt there
        # (duplicates() checks the hung process had ended before it started)
        mine = runs_of_job(runs, job_id)
        if behaviour == "hung" and any(r.attempt == 1 for r in mine):
            if any(r.attempt > 1 for r in mine):
                verdict.hung_restarted += 1
            else:
                verdict.wrong_status += 1
                verdict.details.append(f"{job_id} (hung): its first attempt ran and nothing "
                                       "ran after it")
    state = driver.state()
    jobs = {j["id"]: j for j in (state or {}).get("jobs", [])}
    runs_of: dict[str, list[Run]] = {}
    for r in runs:
        runs_of.setdefault(r.job, []).append(r)
    for job_id, behaviour in behaviours.items():
        job, mine = jobs.get(job_id), runs_of.get(job_id, [])
        want_status, want_class = expected_status(behaviour)
        needs_output = behaviour != "fails"
        proof = completed_proof(job_id, mine, read_output(work / "out" / f"{job_id}.json"),
                                needs_output)
        status = job["status"] if job else None
        got_class = ((job or {}).get("failure") or {}).get("class")
        if status not in ("completed", "stuck", "killed", "blocked") or \
                (want_status == "completed" and proof):
            verdict.lost += 1
            verdict.details.append(f"lost {job_id} ({behaviour}): state {status}; {proof}")
        if status == "completed" and proof:
            verdict.completed_unverified += 1
            verdict.details.append(f"completed unverified: {proof}")
        if status == "stuck" and (why := stuck_proof(job_id, mine, got_class)):
            verdict.stuck_unverified += 1
            verdict.details.append(why)
        if status != want_status or (want_class and got_class != want_class):
            verdict.wrong_status += 1
            verdict.details.append(f"{job_id} ({behaviour}): {status} {got_class}")
    verdict.retried_by_hand = len(victims)
    unexplained = explain_retries(victims, effective, GPUS_PER_HOST)
    verdict.retried_unexplained = len(unexplained)
    verdict.details += unexplained
    verdict.left_running = left_running(bed)
    resumes = judge_resumes(recorded, runs, work, {
        name: [(f.t0, f.t1) for f in injected if f.kind == "reboot" and f.host == name]
        for name in bed.hosts})
    verdict.resumes = resumes.to_json()
    verdict.restarts_wrong = len(resumes.from_zero + resumes.twice_over + resumes.skipped)
    verdict.details += resumes.from_zero + resumes.twice_over + resumes.skipped
    restarted = {job for job, of_job in runs_of.items()
                 if len({(r.host, r.pid) for r in of_job}) > 1}
    verdict.final_metric_checked, found = final_metric_mismatches(cmds, restarted, work)
    verdict.final_metric_mismatches = len(found)
    verdict.details += found
    return verdict


def runs_of_job(runs: list[Run], job_id: str) -> list[Run]:
    return [r for r in runs if r.job == job_id]


def left_running(bed: SshBed) -> int:
    marker = f"EQ_BED={bed.root}".encode()
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if marker in (entry / "environ").read_bytes().split(b"\0") and \
                    b"fake-train" in (entry / "cmdline").read_bytes():
                # a stale job's orphaned child is expected to be gone once its session is cleaned
                count += 1
    return count


def say(line: str) -> None:
    """Progress on stderr (stdout may be the JSON verdict)."""
    print(f"chaos: {line}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=240)
    parser.add_argument("--faults", choices=("short", "long"), default="long")
    parser.add_argument("--seed", type=int, default=None,
                        help="the jobs' mix and the fault schedule (default: drawn, printed)")
    parser.add_argument("--keep", action="store_true", help="keep the bed and run dir")
    parser.add_argument("--json", action="store_true", help="print the verdict as one JSON object")
    args = parser.parse_args()
    try:
        seed = random.randrange(1 << 31) if args.seed is None else args.seed
        verdict = run(args.jobs, args.faults, seed, keep=args.keep)
    except RunStopped as exc:
        print(f"chaos: no verdict: {exc}", file=sys.stderr)
        sys.exit(1)
    if args.json:
        print(json.dumps(verdict.to_json()))
    else:
        summary = {k: v for k, v in verdict.to_json().items()
                   if k not in ("details", "fault_traces")}
        print("chaos: " + ", ".join(f"{k} {v}" for k, v in summary.items()))
        for trace in verdict.traces:
            print("  effective: " + trace)
        for problem in verdict.details:
            print("  " + problem)
    sys.exit(0 if verdict.ok else 1)


if __name__ == "__main__":
    main()
