"""A bad night, hands off: hangs, a GPU going bad, leaked memory, OOMs and an engine kill -9.

    .venv/bin/python bench/bad_night.py [--poll 2] [--stall-after 20]

40 jobs on two real sshd hosts (4 simulated GPUs each): 3 that hang silently and 1 that prints
an NCCL watchdog timeout and hangs (each on its first attempt), 2 that leave a child holding
GPU memory after they exit, 5 that hit a CUDA OOM once, 3 healthy ones with a 45 s silent
stretch on a busy GPU, and the rest plain. `stall_after: 20s`, `on_stall: restart`. Mid-run one
GPU's uncorrected ECC count grows, and the engine (`eq-tui --no-ui`, a process of its own) is
killed with SIGKILL once and started again with the same command. Notifications go to an HTTP
receiver on 127.0.0.1.

Reports: whether the sweep finished with no human action; each hang's detection delay (from the
fake job's own `hang` record to the engine's `job_stalled`), against the window plus two polls;
how long after its job's end each leaked child was ended; false stalls among the quiet jobs;
the quarantine; the notifications expected, received, lost and doubled (by note id, across the
kill); GPU time lost to hangs as a share of the sweep's GPU time, against the same sweep with
detection off (there a hung job holds its GPU until the sweep's end at least: a lower bound).
Writes bench/results/bad_night.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eq_tui.sim.state import read_runs, set_gpu_health
from tests.support.receiver import Receiver
from tests.support.sshbed import USER, SshBed

PLAIN = "fake-train --epochs 5 --epoch-seconds 2 --mem 2000"
HUNG = "fake-train --epochs 5 --epoch-seconds 2 --mem 2000 --hang-after 2 --hang-attempts 1"
SICK_HOST, SICK_GPU = "n2", 3


def jobs() -> list[tuple[str, str]]:
    listed = [(f"hang{i}", HUNG) for i in range(3)]
    listed.append(("nccl0", f"{HUNG} --nccl-hang"))
    listed += [(f"leak{i}", f"{PLAIN} --leak-child 3000") for i in range(2)]
    listed += [(f"oom{i}", f"{PLAIN} --oom-attempts 1") for i in range(5)]
    listed += [(f"quiet{i}", "fake-train --epochs 2 --epoch-seconds 45 --mem 2000")
               for i in range(3)]
    listed += [(f"plain{i:02d}", PLAIN) for i in range(40 - len(listed))]
    return listed


def manifest_text(bed: SshBed, work: Path, url: str, stall_after: float) -> str:
    hosts = "\n".join(f"  - {{name: {n}, ssh: {n}, log_dir: {work}/logs}}" for n in bed.hosts)
    lines = "\n".join(f"  - {{id: {job_id}, cmd: \"{cmd} --seed {i}\"}}"
                      for i, (job_id, cmd) in enumerate(jobs()))
    return (f"project: night\ncwd: {work}\noom_retry: {{delay: 5, max_attempts: 3}}\n"
            f"stall_after: {stall_after:g}s\non_stall: restart\nhosts:\n{hosts}\n"
            f"notify:\n  - {{on: [stuck, stalled, quarantined, phase_done, finished], "
            f"url: '{url}'}}\njobs:\n{lines}\n")


def start_engine(manifest: Path, bed: SshBed, poll: float, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "eq_tui", str(manifest), "--no-ui", "--poll", str(poll),
               "--ssh-config", str(bed.ssh_config)]
    with open(log, "ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)


def events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def drive(bed: SshBed, manifest: Path, run_dir: Path, poll: float) -> dict[str, Any]:
    """Run the sweep: start, a GPU going bad, a kill -9 and a restart, to the end."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    log = run_dir.parent / "engine.out"
    sick = bed.hosts[SICK_HOST].sim_state
    set_gpu_health(sick, ecc={SICK_GPU: 0})
    started = time.time()
    engine = start_engine(manifest, bed, poll, log)
    killed_at = went_bad_at = None
    code = None
    while code is None:
        time.sleep(0.5)
        code = engine.poll()
        elapsed = time.time() - started
        if went_bad_at is None and elapsed > 35:
            set_gpu_health(sick, ecc={SICK_GPU: 2})
            went_bad_at = time.time()
        if killed_at is None and elapsed > 50 and code is None:
            engine.send_signal(signal.SIGKILL)
            engine.wait()
            killed_at = time.time()
            engine = start_engine(manifest, bed, poll, log)  # the same command: it resumes
        if elapsed > 900:
            engine.kill()
            raise SystemExit("the sweep did not finish in 15 minutes")
    return {"exit_code": code, "started": started, "ended": time.time(),
            "killed_at": killed_at, "went_bad_at": went_bad_at}


def measure(bed: SshBed, run_dir: Path, receiver: Receiver, run: dict[str, Any],
            poll: float, stall_after: float) -> dict[str, Any]:
    history = events(run_dir)
    runs = {name: read_runs(host.sim_state) for name, host in bed.hosts.items()}
    all_runs = [event for host_runs in runs.values() for event in host_runs]
    hangs = {(e["job"], e["attempt"]): float(e["t"]) for e in all_runs if e["event"] == "hang"}
    stalled = {}
    for event in history:
        if event["type"] == "job_stalled" and event["action"] == "alert":
            stalled.setdefault((event["job"], event["attempt"]), float(event["at"]))
    detection = {f"{job}/a{n}": round(stalled[(job, n)] - t, 2) if (job, n) in stalled else None
                 for (job, n), t in hangs.items()}
    ends = {(e["job"], e["attempt"]): float(e["t"]) for e in all_runs if e["event"] == "end"}
    starts = [e for e in all_runs if e["event"] == "start"]
    leftovers = {}
    for event in history:
        if event["type"] == "alert" and "leftover process" in event["message"]:
            job = event["job"]
            attempt = int(event["message"].split("(attempt ", 1)[1].split(")", 1)[0])
            leftovers[f"{job}/a{attempt}"] = round(float(event["at"]) - ends[(job, attempt)], 2)
    quiet_stalls = [e for e in history if e["type"] == "job_stalled"
                    and e["job"].startswith("quiet")]
    quarantined = [e for e in history if e["type"] == "gpu_quarantined"]
    after = [e for e in starts if e["gpu"] == SICK_GPU and run["went_bad_at"]
             and any(q["host"] == SICK_HOST for q in quarantined)
             and float(e["t"]) > float(quarantined[0]["at"]) + 1
             and e in runs[SICK_HOST]]
    # GPU time: every attempt's span on its GPU; lost to a hang: from the hang to the end
    busy = sum(ends.get((e["job"], e["attempt"]), run["ended"]) - float(e["t"]) for e in starts)
    lost = sum(ends.get(key, run["ended"]) - t for key, t in hangs.items())
    makespan = run["ended"] - run["started"]
    lost_off = sum(run["ended"] - t for t in hangs.values())
    expected = {f"stalled:{job}:{n}:{action}" for (job, n) in hangs
                for action in ("alert", "restart")}
    expected |= {f"quarantined:{q['host']}:{q['gpu']}:{q['reason']}" for q in quarantined}
    expected |= {"phase_done:main", "finished"}
    received = [e["id"] for m in receiver.received() for e in m["events"]]
    return {
        "exit_code": run["exit_code"], "makespan_s": round(makespan, 1),
        "engine_killed": run["killed_at"] is not None,
        "hang_detection_s": detection, "limit_s": stall_after + 2 * poll,
        "hangs_within_limit": all(v is not None and v <= stall_after + 2 * poll
                                  for v in detection.values()),
        "leaked_freed_after_end_s": leftovers,
        "false_stalls_quiet_jobs": len(quiet_stalls),
        "quarantined": [(q["host"], q["gpu"], q["reason"]) for q in quarantined],
        "launches_on_sick_gpu_after_quarantine": len(after),
        "notifications": {"expected": sorted(expected), "messages": len(receiver.received()),
                          "lost": sorted(expected - set(received)),
                          "doubled": sorted({i for i in received if received.count(i) > 1}),
                          "unexpected": sorted(set(received) - expected)},
        "gpu_time_lost_to_hangs_share": round(lost / busy, 4) if busy else None,
        "gpu_time_lost_detection_off_share_lower_bound":
            round(lost_off / (busy - lost + lost_off), 4) if busy else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--poll", type=float, default=2.0)
    parser.add_argument("--stall-after", type=float, default=20.0)
    args = parser.parse_args()
    bed = SshBed.create([(name, 4, 24576, "NVIDIA L40S (sim)") for name in ("n1", "n2")])
    receiver = Receiver()
    try:
        work = bed.work / "night"
        work.mkdir()
        shutil.chown(work, USER, USER)
        with tempfile.TemporaryDirectory() as scratch:
            manifest = Path(scratch) / "night.yaml"
            manifest.write_text(manifest_text(bed, work, receiver.url, args.stall_after))
            run_dir = Path(scratch) / "experiment_queue" / "night"
            run = drive(bed, manifest, run_dir, args.poll)
            result = measure(bed, run_dir, receiver, run, args.poll, args.stall_after)
            shutil.copy(run_dir.parent / "engine.out", "/tmp/bad_night-engine.out")
    finally:
        receiver.close()
        bed.close()
    out = Path(__file__).parent / "results" / "bad_night.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["exit_code"] == 0 else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
