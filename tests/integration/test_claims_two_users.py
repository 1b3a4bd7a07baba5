"""Two people, one pair of boxes: two engines (two login users, two projects) on the same two
real sshd hosts with two simulated GPUs each, every job allocating its memory 3 s after it
starts. Judged from the hosts' own records (tests/support/bookings.py), never from either
engine's state: no GPU is given to both engines at once, with packed jobs the estimates on a GPU
never add up to more than its memory, and an engine that comes second to a host another engine
fills gets its fair turns."""

from __future__ import annotations

import asyncio
import json
import math
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eq_tui.sim.state import hold_memory
from eq_tui.tui.host_panel import host_body
from tests.support.bookings import (
    BOOKED_CMD,
    Booking,
    bookings,
    double_bookings,
    gpu_time_shares,
    most_claimed,
    taken_while_behind,
    timeline,
    two_user_boxes,
)
from tests.support.sshbed import OTHER_USER, USER, SshBed

pytestmark = pytest.mark.integration
OTHER = OTHER_USER
USERS = (USER, OTHER)
GPU_MIB = 24576
JOBS = 12
# The fair turns' tests: what the second engine's share is measured over, and what it must reach
WINDOW_S = 15.0
FAIR_SHARE = 0.3


@pytest.fixture(scope="module")
def bed() -> Iterator[SshBed]:
    ssh_bed = two_user_boxes(GPU_MIB)
    yield ssh_bed
    ssh_bed.close()


@pytest.fixture(autouse=True)
def no_wants_of_ended_engines(bed: SshBed) -> None:
    """Each test starts without the want and turn files of the module's earlier tests. An
    engine that ends takes its want back, but one killed (a failing test's `finally`) leaves it
    fresh for 3 of its polls + 10 s, and a test that started in that time would see its
    launches yield to an engine that is gone."""
    for host in bed.hosts.values():
        for leftover in [*host.claims.glob("w.*"), *host.claims.glob("y.*")]:
            leftover.unlink(missing_ok=True)


def manifest(bed: SshBed, tmp: Path, user: str, project: str, launcher: str,
             mem_mib: int | None, jobs: int = JOBS, staggered: bool = False,
             epoch_s: float = 1.0) -> Path:
    """`staggered`: the jobs' lengths differ (5.0, 5.8, 6.6, 7.4 s and again), so that jobs
    started together do not end together. `epoch_s`: each of the two epochs' length (3 s
    before the first is what races: no memory used on the GPU yet)."""
    alloc = mem_mib or 4000
    cmd = f"{BOOKED_CMD}; sleep 3; fake-train --epochs 2 --mem {alloc}"
    lines = [f"project: {project}", f"launcher: {launcher}", "hosts:"]
    lines += [f"  - {{name: {name}, ssh: {bed.alias(name, user)}}}" for name in bed.hosts]
    if mem_mib is not None:
        lines.append(f"mem_mib: {mem_mib}")
    lines.append("jobs:")
    for i in range(jobs):
        length = epoch_s + 0.4 * (i % 4) if staggered else epoch_s
        job_cmd = f"{cmd} --epoch-seconds {length:g} --seed {i}"
        lines.append(f"  - {{id: {project}-{i:02d}, cmd: {json.dumps(job_cmd)}}}")
    path = tmp / f"{project}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def new_projects() -> tuple[str, str]:
    """The two engines' projects, this test's own: the hosts' records of another test (another
    worker's bed, the same login users) are never read as its."""
    tag = secrets.token_hex(3)
    return f"ua{tag}", f"ub{tag}"


def engine_process(bed: SshBed, tmp: Path, user: str, project: str, launcher: str,
                   mem_mib: int | None, jobs: int, poll: float, staggered: bool = False,
                   epoch_s: float = 1.0) -> tuple[subprocess.Popen[str], Path]:
    run_dir = tmp / f"run-{project}"
    engine = subprocess.Popen(
        [sys.executable, "-m", "eq_tui", str(manifest(bed, tmp, user, project, launcher,
                                                      mem_mib, jobs, staggered, epoch_s)),
         "--no-ui", "--poll", str(poll), "--run-dir", str(run_dir),
         "--ssh-config", str(bed.ssh_config)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return engine, run_dir


def run_both(bed: SshBed, tmp: Path, projects: tuple[str, str]) -> None:
    """Both engines at once (the second with tmux), each to the end of its queue. Each job
    holds its GPU 3.5 s: 3 s before it uses any memory (the race), then two 0.25 s epochs."""
    started = [engine_process(bed, tmp, USER, projects[0], "screen", None, JOBS, 0.5,
                              epoch_s=0.25),
               engine_process(bed, tmp, OTHER, projects[1], "tmux", None, JOBS, 0.5,
                              epoch_s=0.25)]
    for engine, run_dir in started:
        try:
            _out, err = engine.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for other, _ in started:
                other.kill()
            raise
        assert engine.returncode == 0, (err[-2000:], unfinished(run_dir))
        state = json.loads((run_dir / "queue_state.json").read_text())
        assert {job["status"] for job in state["jobs"]} == {"completed"}


def unfinished(run_dir: Path) -> list[object]:
    state = json.loads((run_dir / "queue_state.json").read_text())
    return [(job["id"], job["status"], job["failure"], job["reason"],
             [(a["host"], a["gpus"], a["exit_code"], a["failure_class"]) for a in job["history"]])
            for job in state["jobs"] if job["status"] != "completed"]


def test_two_users_engines_never_double_book_a_gpu(bed: SshBed, tmp_path: Path) -> None:
    """Both engines start at once, 12 jobs each, and claim the same GPUs from the first tick.
    No share is asserted here: a symmetric start splits the GPUs evenly with no fair turns at all
    (0.50/0.50 with them switched off, issue 42); the fair turns' tests below start the second
    engine once the first holds every GPU."""
    since, projects = time.time(), new_projects()
    run_both(bed, tmp_path, projects)
    found = bookings(USERS, projects, since=since)
    assert {b.job for b in found} == {f"{p}-{i:02d}" for p in projects for i in range(JOBS)}
    assert double_bookings(found) == []


@dataclass(frozen=True)
class Contest:
    """What the hosts recorded of a contest, when the second engine waited, and the window
    (wall clock): WINDOW_S from the first end of a job of the first engine after that."""
    projects: tuple[str, str]
    found: list[Booking]
    waited: float
    window: tuple[float, float]

    def second_share(self, mib_of: Mapping[str, int] | None = None) -> float:
        shares = gpu_time_shares(self.found, self.window, mib_of)
        second = f"{OTHER}/{self.projects[1]}-"
        return sum(share for engine, share in shares.items() if engine.startswith(second))

    def contested(self) -> list[Booking]:
        """The jobs started before the window's end (not those the engines launched while the
        kill that ends the contest was on its way)."""
        return [b for b in self.found if b.start < self.window[1]]

    def kept_while_ahead(self, mib_of: Mapping[str, int] | None = None) -> list[Booking]:
        """Jobs either engine started in the window (from a few seconds after the second's
        want file) on a host where the other, waiting too, held less than it just then: what a
        fair turn refuses, whichever engine holds more."""
        slack = 3.0
        window = (max(self.window[0], self.waited + slack), self.window[1])
        first, second = f"{USER}/{self.projects[0]}-", f"{OTHER}/{self.projects[1]}-"
        return (taken_while_behind(self.found, first, second, window, mib_of, slack)
                + taken_while_behind(self.found, second, first, window, mib_of, slack))

    def report(self, mib_of: Mapping[str, int] | None = None) -> str:
        """The shares and the bookings, for a failing test's message (the window's start and
        end in the timeline's seconds)."""
        t0 = min((b.start for b in self.found), default=self.window[0])
        return (f"shares {gpu_time_shares(self.found, self.window, mib_of)}, window "
                f"{self.window[0] - t0:.2f}-{self.window[1] - t0:.2f}\n{timeline(self.found)}")


def contest(bed: SshBed, tmp: Path, *, mems: tuple[int | None, int | None], running: int,
            jobs: tuple[int, int]) -> Contest:
    """The first engine (poll 0.5 s) starts alone with a queue longer than the contest; once it
    holds `running` jobs (every GPU, every slot), the second (poll 2 s, the default) starts.
    Without fair turns the first keeps everything: its own watcher sees each of its jobs end and
    its next job is launched before the second's next probe sees the room free. The window
    opens when the second waited (its first probe's want file on the hosts: its start-up, slow
    on a busy machine, is not the first engine's doing) and a job of the first ended after that
    (before it, nothing is anyone's turn), and lasts WINDOW_S of wall time; then what is left of
    both queues is killed. `jobs`: each queue's length, more than it can start by then (with every
GPU for the first), so that the window ends on neither engine's last job."""
    since, projects = time.time(), new_projects()
    engines = [engine_process(bed, tmp, USER, projects[0], "screen", mems[0], jobs[0], 0.5,
                              staggered=True)]
    try:
        wait_for(lambda: len([b for b in bookings(USERS, projects, since=since)
                              if b.end == math.inf]) >= running, engines[0][0])
        engines.append(engine_process(bed, tmp, OTHER, projects[1], "tmux", mems[1], jobs[1],
                                      2.0, staggered=True))
        both = [engine for engine, _ in engines]
        wait_for(lambda: any(next(host.claims.glob(f"w.{OTHER}.{projects[1]}.*"), None)
                             for host in bed.hosts.values()), *both)
        waited = time.time()
        ended: list[float] = []

        def first_ended() -> bool:
            ended[:] = [b.end for b in bookings(USERS, projects[:1], since=since)
                        if waited <= b.end < math.inf]
            return bool(ended)

        wait_for(first_ended, *both)
        window = (min(ended), min(ended) + WINDOW_S)
        wait_for(lambda: time.time() >= window[1], *both)
        kill_queues([run_dir for _, run_dir in engines], both)
        # each engine ended with jobs that had waited: each took its want back as it did
        assert [path.name for host in bed.hosts.values() for project in projects
                for path in host.claims.glob(f"w.*.{project}.*")] == []
    finally:
        for engine, _ in engines:
            if engine.poll() is None:
                engine.kill()
                engine.wait()
    found = bookings(USERS, projects, since=since)
    for project, queue in zip(projects, jobs, strict=True):
        started = {b.job for b in found if b.job.startswith(project) and b.start < window[1]}
        assert len(started) < queue, f"{project} ran out of jobs before the window's end"
    return Contest(projects, found, waited, window)


def kill_queues(run_dirs: list[Path], engines: list[subprocess.Popen[str]]) -> None:
    """What is left of each queue killed (`eq-tui kill`), and each engine gone (exit 1: jobs
    were killed)."""
    killers = [subprocess.Popen(
        [sys.executable, "-m", "eq_tui", "kill", str(run_dir), "--no-start", "--grace", "1s",
         "--filter", "status:pending,launching,running,failed_oom"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for run_dir in run_dirs]
    said = [killer.communicate(timeout=120)[0] for killer in killers]
    for engine, run_dir in zip(engines, run_dirs, strict=True):
        _out, err = engine.communicate(timeout=120)
        assert engine.returncode == 1, (err[-2000:], said, unfinished(run_dir))


def test_two_users_packed_jobs_share_fairly_and_never_claim_more_than_a_gpu_has(
        bed: SshBed, tmp_path: Path) -> None:
    """Packed jobs of two sizes: the first engine's take 11000 MiB (two to a GPU, and no room
    left beside them for the other's: all eight of its slots filled before the second starts),
    the second's 3000 (up to seven to a GPU). Held is counted in MiB (what part of a GPU's
    memory a job held, for how long): a turn by the number of jobs each engine holds would give
    the small jobs' engine as many jobs as the other, and about a fifth of the memory.
    FIGURES"""
    big, small = 11000, 3000
    run = contest(bed, tmp_path, mems=(big, small), running=8, jobs=(64, 64))
    mib = {b.job: big if b.job.startswith(run.projects[0]) else small for b in run.found}
    most = most_claimed(run.contested(), mib)
    print(f"most claimed on a GPU: {most}; with the queues' kill: {most_claimed(run.found, mib)}")
    assert max(most.values()) <= GPU_MIB, (most, run.report(mib))
    judge(run, mib)


def test_an_engine_that_comes_second_gets_its_fair_turns(bed: SshBed, tmp_path: Path) -> None:
    """Whole GPUs: the first engine holds all four when the second starts. Each GPU the first
    frees goes to the one that holds fewer there.
    FIGURES"""
    run = contest(bed, tmp_path, mems=(None, None), running=4, jobs=(40, 24))
    assert double_bookings(run.found) == []
    judge(run, None)


def test_packed_an_engine_that_comes_second_gets_its_fair_turns(bed: SshBed,
                                                                 tmp_path: Path) -> None:
    """The same with packed jobs, two to a GPU, 10000 MiB each (memory-weighted the same as
    job-seconds): the room a job of the first engine frees on a GPU it shares is the second's
    turn while the second holds less of the host's GPU memory.
    FIGURES"""
    run = contest(bed, tmp_path, mems=(10000, 10000), running=8, jobs=(64, 32))
    most = most_claimed(run.contested(), {b.job: 10000 for b in run.found})
    assert max(most.values()) <= GPU_MIB, (most, run.report())
    judge(run, None)


def judge(run: Contest, mib_of: Mapping[str, int] | None) -> None:
    """Fair turns' two marks in the window: neither engine started a job on a host where the
    other, waiting, held less than it (what a turn refuses; without turns the first, quicker to
    see its own GPUs freed, keeps most of them, and small jobs squeezed into a freed slot
    outrun big ones), and the second's share of what was held (GPU-seconds, or MiB-seconds with
    `mib_of`) reached FAIR_SHARE."""
    kept = run.kept_while_ahead(mib_of)
    share = run.second_share(mib_of)
    print(f"the second engine's share: {share:.2f}; jobs started while ahead: {len(kept)}\n"
          f"{run.report(mib_of)}")
    assert kept == [], (kept, run.report(mib_of))
    assert share >= FAIR_SHARE, run.report(mib_of)


def test_a_waiting_engine_that_could_not_use_the_gpu_delays_no_launch(bed: SshBed,
                                                                      tmp_path: Path) -> None:
    """The other engine waits with a job that needs both GPUs of box1 while ours holds one of
    them with a long job: the GPU each of our short jobs frees is of no use to it, so our next
    short job takes it at once. No launch of ours is refused for a turn (our engine's events),
    no turn is ever marked on the host (its y.* file), and our short jobs did launch while it
    waited (the hosts' records)."""
    projects = new_projects()
    gate = Path(tempfile.mkdtemp(prefix="eqgate-"))
    gate.chmod(0o755)
    flag = gate / "go"
    long_cmd = f"{BOOKED_CMD}; while [ ! -e {flag} ]; do sleep 0.2; done"
    ours = [f"  - {{id: {projects[0]}-long, cmd: {json.dumps(long_cmd)}}}"]
    # `: s{i}` tells the eight short jobs apart: copies of one command are refused as waste
    ours += [f"  - {{id: {projects[0]}-s{i}, cmd: {json.dumps(BOOKED_CMD + f'; sleep 1; : s{i}')}}}"
             for i in range(8)]
    theirs = [f"  - {{id: {projects[1]}-both, gpus_per_job: 2, cmd: {json.dumps(BOOKED_CMD)}}}"]
    since = time.time()
    engines, run_dirs = [], []
    marked: list[str] = []
    done = threading.Event()
    claims = bed.hosts["box1"].claims

    def watch_turns() -> None:
        while not done.is_set():
            marked.extend(path.name for path in claims.glob(f"y.{USER}.{projects[0]}.*"))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch_turns, daemon=True)
    watcher.start()
    try:
        for user, project, jobs in ((USER, projects[0], ours), (OTHER, projects[1], theirs)):
            path = tmp_path / f"{project}.yaml"
            path.write_text(f"project: {project}\nhosts:\n  - {{name: box1, ssh: "
                            f"{bed.alias('box1', user)}}}\njobs:\n" + "\n".join(jobs) + "\n")
            run_dirs.append(tmp_path / f"run-{project}")
            engines.append(subprocess.Popen(
                [sys.executable, "-m", "eq_tui", str(path), "--no-ui", "--poll", "0.5",
                 "--run-dir", str(run_dirs[-1]), "--ssh-config", str(bed.ssh_config)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                text=True))
            if user == USER:  # ours holds both GPUs before the other engine starts
                wait_for(lambda: len([b for b in bookings(USERS, projects, since=since)
                                      if b.end == math.inf]) >= 2, engines[0])
        wait_for(lambda: next(claims.glob(f"w.{OTHER}.{projects[1]}.*"), None) is not None,
                 engines[0])
        waited = time.time()
        # two of our short jobs launched on the GPU freed while the other engine waited
        wait_for(lambda: len([b for b in bookings(USERS, projects, since=waited)
                              if b.job != f"{projects[0]}-long"]) >= 2, engines[0])
        flag.touch()
        for engine, run_dir in zip(engines, run_dirs, strict=True):
            _out, err = engine.communicate(timeout=120)
            assert engine.returncode == 0, (err[-2000:], unfinished(run_dir))
    finally:
        done.set()
        watcher.join()
        for engine in engines:
            if engine.poll() is None:
                engine.kill()
                engine.wait()
        shutil.rmtree(gate, ignore_errors=True)
    assert marked == []
    events = (run_dirs[0] / "events.jsonl").read_text()
    assert "fair turn" not in events
    found = bookings(USERS, projects, since=since)
    assert {b.job for b in found} >= {f"{projects[1]}-both", f"{projects[0]}-s7"}


def wait_for(condition: Callable[[], bool], *engines: subprocess.Popen[str]) -> None:
    """Until `condition` holds, while every engine runs (90 s at most)."""
    deadline = time.monotonic() + 90
    while not condition():
        ended = [engine for engine in engines if engine.poll() is not None]
        assert not ended, ("an engine ended early", [(engine.returncode, stderr_tail(engine))
                                                     for engine in ended])
        assert time.monotonic() < deadline
        time.sleep(0.1)


def stderr_tail(engine: subprocess.Popen[str]) -> str:
    _out, err = engine.communicate()
    return (err or "")[-2000:]


def start_engine(bed: SshBed, tmp: Path, user: str, project: str, hosts: str,
                 cmd: str = "sleep 120") -> tuple[subprocess.Popen[str], Path]:
    path = tmp / f"{project}.yaml"
    path.write_text(f"project: {project}\nhosts:\n{hosts}\n"
                    f"jobs:\n  - {{id: {project}-long, cmd: {json.dumps(cmd)}}}\n")
    run_dir = tmp / f"run-{project}"
    engine = subprocess.Popen(
        [sys.executable, "-m", "eq_tui", str(path), "--no-ui", "--poll", "0.5",
         "--run-dir", str(run_dir), "--ssh-config", str(bed.ssh_config)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return engine, run_dir


def gpus_json(run_dir: Path) -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "eq_tui", "status", str(run_dir), "--gpus",
                           "--json"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return []
    hosts: list[dict[str, Any]] = json.loads(done.stdout)
    return hosts


def test_the_grid_and_status_name_who_holds_each_gpu(bed: SshBed, tmp_path: Path) -> None:
    """Another user's eq-tui job (by its claim, before it allocates anything) and a person's
    own process (by the probe's ps) show as the holders of their GPUs."""
    ours, ours_dir = start_engine(
        bed, tmp_path, USER, "ha", "  - {name: box1, ssh: box1, gpus: [0]}\n"
                                   "  - {name: box2, ssh: box2, gpus: [1]}")
    theirs, theirs_dir = start_engine(
        bed, tmp_path, OTHER, "hb", f"  - {{name: box1, ssh: {bed.alias('box1', OTHER)}, "
                                    "gpus: [1]}")
    person = subprocess.Popen(["sleep", "120"], user=OTHER)
    hold_memory(bed.hosts["box2"].sim_state, person.pid, 0, 3072)
    try:
        deadline = time.monotonic() + 90
        while True:
            hosts = {host["host"]: host for host in gpus_json(ours_dir)}
            holders = {(name, gpu["index"]): gpu["holders"]
                       for name, host in hosts.items() for gpu in host["gpus"]}
            if (holders.get(("box1", 1)) and holders.get(("box2", 0))
                    and holders.get(("box1", 0))):
                break
            assert time.monotonic() < deadline, holders
            time.sleep(0.3)
        assert holders[("box1", 0)] == [{"kind": "ours", "job": "ha-long"}]
        [other] = holders[("box1", 1)]
        assert (other["kind"], other["user"], other["project"], other["job"]) == (
            "eq-tui", OTHER, "hb", "hb-long")
        [process] = holders[("box2", 0)]
        assert (process["kind"], process["pid"], process["user"]) == ("process", person.pid,
                                                                      OTHER)
        assert process["command"].startswith("sleep 120")
        # the grid draws the same: the panel of each host names them
        snapshot = live_hosts(ours_dir)
        box1 = host_body(snapshot["box1"], 500).plain
        box2 = host_body(snapshot["box2"], 500).plain
        assert "ha-long" in box1 and f"{OTHER}'s hb/hb-long" in box1
        assert f"pid {person.pid} {OTHER} sleep 120" in box2
        text = subprocess.run([sys.executable, "-m", "eq_tui", "status", str(ours_dir),
                               "--gpus"], capture_output=True, text=True, timeout=60).stdout
        assert "box1 GPU 1" in text and f"{OTHER}'s hb/hb-long" in text
    finally:
        person.kill()
        person.wait()
        for engine, run_dir in ((ours, ours_dir), (theirs, theirs_dir)):
            subprocess.run([sys.executable, "-m", "eq_tui", "kill", str(run_dir),
                            f"{run_dir.name[4:]}-long"], capture_output=True, timeout=60)
            try:
                engine.wait(timeout=60)
            except subprocess.TimeoutExpired:
                engine.kill()
                engine.wait()


def live_hosts(run_dir: Path) -> dict[str, Any]:
    from eq_tui.cli.status_report import _live_snapshot

    snapshot = asyncio.run(_live_snapshot(run_dir))
    assert snapshot is not None
    return {str(host["name"]): host for host in snapshot["hosts"]}
