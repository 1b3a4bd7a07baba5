"""The chaos suite: a sweep on real sshd hosts while the engine, the network and the hosts fail.

    .venv/bin/python -m tests.chaos.chaos                  # the long run: 240 jobs, 16 faults
    .venv/bin/python -m tests.chaos.chaos --jobs 40 --faults short   # what CI runs (a test)

Fake jobs OOM (once, or always), fail for other reasons, leave stale sessions and linger memory.
While the queue runs the driver kills the engine with SIGKILL and restarts it, takes a host off
the network (connections cut, sshd stopped) and brings it back, reboots a host (its sessions
vanish), fills a host's log disk (a tiny tmpfs) for a while, truncates the state file
between two restarts (recovered from the previous good copy, as the error message says), and
sends a clone from the shell as the engine is killed (sent again with its command id, it must
run once).
At the end it checks, from what the fake jobs recorded on the hosts themselves: every job ended
in the status its behaviour implies, every launch is in the history, no job ran twice at once,
no two of our processes held one GPU at once, nothing is left running. It prints one line:
jobs, faults by kind, launches, duplicate launches, overlaps, lost jobs.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eq_tui.sim.state import read_runs, run_intervals
from tests.support.sshbed import USER, SshBed

EQ = [sys.executable, "-m", "eq_tui"]
BEHAVIOURS = (("ok", 60), ("oom_once", 15), ("oom_always", 5), ("fails", 6), ("stale", 6),
              ("slow", 8))


@dataclass
class Report:
    jobs: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    launches: int = 0
    duplicate_launches: int = 0
    overlaps: int = 0
    lost_jobs: int = 0
    wrong_status: list[str] = field(default_factory=list)
    unaccounted: list[str] = field(default_factory=list)
    left_running: int = 0
    retried: int = 0  # stuck because of an injected fault (lost twice, disk full): retried
    reboots: dict[str, list[float]] = field(default_factory=dict)
    overlap_details: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def line(self) -> str:
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()))
        return (f"chaos: {self.jobs} jobs, {sum(self.faults.values())} faults ({faults}), "
                f"{self.launches} launches, {self.duplicate_launches} duplicate launches, "
                f"{self.overlaps} overlaps, {self.lost_jobs} lost jobs, "
                f"{len(self.wrong_status)} in an unexpected status, "
                f"{len(self.unaccounted)} launches unaccounted, {self.left_running} left "
                f"running, {self.retried} retried by hand after a fault, {self.wall_s:.0f} s")

    @property
    def ok(self) -> bool:
        return not (self.duplicate_launches or self.overlaps or self.lost_jobs
                    or self.wrong_status or self.unaccounted or self.left_running)


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
    }[behaviour]


def expected_status(behaviour: str) -> tuple[str, str | None]:
    return {"oom_always": ("stuck", "cuda_oom"), "fails": ("stuck", "exit_nonzero")}.get(
        behaviour, ("completed", None))


def write_manifest(bed: SshBed, work: Path, path: Path, n_jobs: int,
                   seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    names, weights = zip(*BEHAVIOURS, strict=True)
    behaviours = {f"job{i:03d}": rng.choices(names, weights)[0] for i in range(n_jobs)}
    lines = [f"project: chaos\ncwd: {work}\nstale_grace_s: 2\nretry_delay_s: 2",
             "oom_retry: {delay: 1, max_attempts: 3}", "hosts:"]
    for name in bed.hosts:
        lines.append(f"  - {{name: {name}, ssh: {name}, log_dir: {work}/logs-{name}}}")
    lines.append("jobs:")
    for job_id, behaviour in behaviours.items():
        check = "" if behaviour in ("fails",) else ", output_check: 'out/${JOB_ID}.json'"
        lines.append(f"  - {{id: {job_id}, cmd: {json.dumps(command_for(behaviour, rng))}"
                     f"{check}}}")
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

    def kill_engine(self) -> None:
        assert self.engine is not None
        self.engine.send_signal(signal.SIGKILL)
        self.engine.wait()

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


def run(n_jobs: int, faults: str, seed: int, keep: bool = False) -> Report:
    started = time.monotonic()
    bed = SshBed.create([("alpha", 4, 24576, "NVIDIA RTX 4090 (sim)"),
                         ("beta", 4, 24576, "NVIDIA L4 (sim)")])
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
    behaviours = write_manifest(bed, work, manifest, n_jobs, seed)
    run_dir = root / "run"
    driver = Driver(bed, manifest, run_dir, poll=0.5)
    report = Report(jobs=n_jobs)
    rng = random.Random(seed + 1)
    plan = ["kill9", "cut_host", "kill9", "reboot", "corrupt_state", "kill9", "disk_full",
            "command_kill9", "cut_host", "kill9"]
    if faults == "long":
        plan = plan * 2
    try:
        driver.start_engine()
        for fault in plan:
            # let the queue make progress between faults
            target = sum(driver.counts().values()) and driver.counts()["completed"] + 2
            deadline = time.monotonic() + 20
            while driver.counts()["completed"] < target and time.monotonic() < deadline \
                    and not driver.finished():
                time.sleep(0.2)
            if driver.finished():
                break
            target_host = rng.choice(sorted(bed.hosts))
            if fault == "kill9":
                driver.kill_engine()
                driver.start_engine()
            elif fault == "cut_host":
                bed.take_down(target_host)
                time.sleep(rng.uniform(2, 4))
                bed.start(target_host)
            elif fault == "reboot":
                report.reboots.setdefault(target_host, []).append(bed.reboot(target_host))
            elif fault == "corrupt_state":
                driver.kill_engine()
                state_file = run_dir / "queue_state.json"
                state_file.write_text(state_file.read_text()[:200])
                driver.start_engine()
                assert driver.engine is not None
                code = driver.engine.wait(timeout=60)
                assert code == 3, f"a truncated state file must stop the engine, got {code}"
                shutil.copy(run_dir / "queue_state.prev.json", state_file)  # as it advises
                driver.start_engine()
            elif fault == "command_kill9":
                clone = command_while_killed(driver, behaviours, report.faults[fault])
                behaviours[clone] = "ok"
            elif fault == "disk_full":
                filler = fill_disk(work, target_host)
                time.sleep(3)
                free_disk(filler)
            report.faults[fault] += 1
        assert driver.engine is not None
        driver.engine.wait(timeout=600)
        report.retried = retry_fault_victims(manifest, run_dir, bed)
        report.wall_s = time.monotonic() - started
        check(report, driver, bed, behaviours)
    finally:
        driver.log.close()
        if driver.engine is not None and driver.engine.poll() is None:
            driver.kill_engine()
        if not keep:
            unmount(mounts)
            bed.close()
            shutil.rmtree(root, ignore_errors=True)
    return report


def command_while_killed(driver: Driver, behaviours: dict[str, str], n: int) -> str:
    """A clone sent from the shell as the engine is killed with SIGKILL: it may or may not
    have arrived. Sent again with its id while no engine runs (exit 3), then to the restarted
    engine: applied once either way (the check counts the clone's runs on the hosts)."""
    source = next(job_id for job_id, b in behaviours.items() if b == "ok")
    clone = f"{source}-chaos{n}"
    verb = [*EQ, "clone", str(driver.run_dir), source, "--id", clone, "--command-id",
            f"chaos-{n}"]
    sent = subprocess.Popen(verb, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(random.uniform(0.0, 0.3))
    driver.kill_engine()
    first = sent.wait(timeout=120)
    assert first in (0, 3), f"clone while killed: exit {first}"
    nobody = subprocess.run(verb, capture_output=True, timeout=120)
    assert nobody.returncode == 3, nobody.stderr
    driver.start_engine()
    deadline = time.monotonic() + 60
    while True:
        again = subprocess.run(verb, capture_output=True, text=True, timeout=120)
        if again.returncode != 3 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert again.returncode == 0, again.stderr
    if first == 0:
        assert "had arrived already" in again.stdout, again.stdout
    return clone


FAULT_CLASSES = ("lost", "launch_failed", "disk_full")


def retry_fault_victims(manifest: Path, run_dir: Path, bed: SshBed) -> int:
    """What a person does after the faults: resume launching and retry the jobs that a fault
    (not their own behaviour) left stuck; the engine then finishes them."""
    import asyncio

    from eq_tui.engine.engine import Engine
    from eq_tui.hosts.factory import make_hosts
    from eq_tui.manifest.loader import load_manifest

    async def go() -> int:
        loaded = load_manifest(manifest)
        hosts = make_hosts(loaded, run_dir, ssh_config=str(bed.ssh_config))
        engine = Engine(loaded, run_dir, hosts, poll=0.5, exit_when_done=True)
        await engine.start()
        victims = [j.id for j in engine.jobs.values() if str(j.status) == "stuck"
                   and j.failure is not None and j.failure.cls in FAULT_CLASSES]
        await engine.command("resume")
        if victims:
            await engine.command("retry", victims)
        await asyncio.wait_for(engine.run(), 600)
        return len(victims)

    return asyncio.run(go())


def check(report: Report, driver: Driver, bed: SshBed, behaviours: dict[str, str]) -> None:
    state = driver.state()
    assert state is not None
    jobs = {j["id"]: j for j in state["jobs"]}
    records: list[dict[str, Any]] = []
    for host in bed.hosts.values():
        records += [dict(r, host=host.name) for r in read_runs(host.sim_state)]
    runs_by_job: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        runs_by_job.setdefault(str(record.get("job")), []).append(record)
    for job_id, behaviour in behaviours.items():
        job = jobs.get(job_id)
        if job is None or job["status"] not in ("completed", "stuck", "killed", "blocked"):
            report.lost_jobs += 1
            continue
        want_status, want_class = expected_status(behaviour)
        got_class = (job.get("failure") or {}).get("class")
        if job["status"] != want_status or (want_class and got_class != want_class):
            report.wrong_status.append(f"{job_id} ({behaviour}): {job['status']} {got_class}")
        launched = [a for a in job["history"] if a.get("launched", True)]
        report.launches += len(launched)
        seen = [r for r in runs_by_job.get(job_id, []) if r["event"] in ("start", "oom")]
        attempts_seen = {int(r.get("attempt", 0)) for r in seen}
        attempts_launched = {a["n"] for a in launched}
        if not attempts_seen <= attempts_launched:
            report.unaccounted.append(f"{job_id}: ran attempts {sorted(attempts_seen)}, "
                                      f"history has {sorted(attempts_launched)}")
        starts = Counter(int(r.get("attempt", 0)) for r in seen)
        report.duplicate_launches += sum(n - 1 for n in starts.values() if n > 1)
    for host in bed.hosts.values():
        found = gpu_overlaps(read_runs(host.sim_state), report.reboots.get(host.name, []))
        report.overlaps += len(found)
        report.overlap_details += [f"{host.name} {line}" for line in found]
    report.duplicate_launches += concurrent_runs(records)
    report.left_running = left_running(bed)


def gpu_overlaps(runs: list[dict[str, Any]], reboots: list[float]) -> list[str]:
    """Attempts of ours whose time on one GPU overlapped. A process a reboot killed wrote no
    end record: it ended at that reboot."""
    intervals = []
    for interval in run_intervals(runs):
        end = interval.end
        if end == float("inf"):
            end = min((t for t in reboots if t >= interval.start), default=end)
        intervals.append((interval.gpu, interval.start, end, f"{interval.job}/a{interval.attempt}"))
    intervals.sort()
    found = []
    busy: dict[int, tuple[float, str]] = {}
    for gpu, start, end, name in intervals:
        until, holder = busy.get(gpu, (float("-inf"), ""))
        if start < until:
            found.append(f"GPU {gpu}: {name} started at {start:.2f} while {holder} held it "
                         f"until {until:.2f}")
        if end > until:
            busy[gpu] = (end, name)
    return found


def concurrent_runs(records: list[dict[str, Any]]) -> int:
    """Runs of the same job whose [start, end] intervals overlap (on any hosts)."""
    spans: dict[str, list[tuple[float, float]]] = {}
    open_starts: dict[tuple[str, int], float] = {}
    for record in sorted(records, key=lambda r: r["t"]):
        key = (str(record.get("job")), int(record.get("pid", 0)))
        if record["event"] == "start":
            open_starts[key] = float(record["t"])
        elif record["event"] == "end" and key in open_starts:
            spans.setdefault(key[0], []).append((open_starts.pop(key), float(record["t"])))
    for key, start in open_starts.items():  # killed by a reboot: no end record
        spans.setdefault(key[0], []).append((start, start))
    overlapping = 0
    for intervals in spans.values():
        intervals.sort()
        for (_s1, e1), (s2, _e2) in itertools.pairwise(intervals):
            if s2 < e1:
                overlapping += 1
    return overlapping


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=240)
    parser.add_argument("--faults", choices=("short", "long"), default="long")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the bed and run dir")
    args = parser.parse_args()
    report = run(args.jobs, args.faults, args.seed, keep=args.keep)
    print(report.line())
    for problem in report.wrong_status + report.unaccounted + report.overlap_details:
        print("  " + problem)
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
