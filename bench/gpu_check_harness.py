"""The parts of bench/gpu_check.py that touch the outside: the nvidia-smi sampler, who owns a
GPU process (/proc), the jobs of each backend (torch on a real GPU, fake-train on a simulated
one) and one `eq-tui MANIFEST --no-ui` run with its records."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
JOB_SCRIPT = Path(__file__).resolve().parent / "gpu_jobs" / "torch_job.py"
GPU_QUERY = "--query-gpu=index,memory.used,memory.total,utilization.gpu"
APPS_QUERY = "--query-compute-apps=pid,gpu_uuid,used_memory"
CSV = "--format=csv,noheader,nounits"
# what a torch process holds beyond its tensor: on an H100 an 11 GiB tensor, one 4096^2 matrix
# and the context read 12,164 MiB (GPU_FACTS.md); the simulated jobs add it so both modes ask
# alike
TORCH_OVERHEAD_MIB = 900
TORCH_INIT_S = 3.5  # import torch + CUDA init before the first allocation (GPU_FACTS.md)
SIM_MODEL = "NVIDIA H100 80GB HBM3 (sim)"
SIM_MEMORY_MIB = 81920


@dataclass(frozen=True)
class App:
    pid: int
    mib: int


@dataclass(frozen=True)
class Sample:
    """One reading of the watched GPU: `t` is the wall-clock middle of the process query (the
    card's memory and utilisation are read just before it)."""

    t: float
    used_mib: int
    total_mib: int
    util: int
    apps: tuple[App, ...]


@dataclass(frozen=True)
class Owner:
    """Whose a GPU process is, from its environment; `started` from /proc (epoch seconds) and
    `session`, its session id (a process that made its own, as a leaked `setsid` child does,
    has its pid there)."""

    project: str
    job: str
    attempt: int
    started: float | None
    session: int | None = None


def started_at(stat: str) -> float:
    """A process's start (epoch seconds, to the clock tick) from its /proc stat line."""
    ticks = float(stat.rsplit(")", 1)[1].split()[19])  # field 22: starttime
    # /proc/stat's btime is whole seconds; now - uptime places the boot to 10 ms
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


def process_owner(pid: int) -> Owner | None:
    """The EQ_* variables of a process and when it started; None: not ours or gone."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    env = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0")
               if "=" in item)
    if "EQ_JOB_ID" not in env:
        return None
    return Owner(env.get("EQ_PROJECT", ""), env["EQ_JOB_ID"], int(env.get("EQ_ATTEMPT", "0")),
                 started_at(stat), int(stat.rsplit(")", 1)[1].split()[3]))


def smi(command: list[str], args: list[str], env: dict[str, str] | None) -> list[list[str]]:
    """nvidia-smi's csv rows; [] when it fails."""
    try:
        done = subprocess.run([*command, *args], capture_output=True, text=True, env=env,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode != 0:
        return []
    return [[cell.strip() for cell in line.split(",")] for line in done.stdout.splitlines()
            if line.strip()]


def _int(text: str) -> int:
    try:
        return int(float(text))
    except ValueError:
        return 0  # [N/A], [Not Supported]


@dataclass
class Sampler:
    """Reads nvidia-smi every `interval` seconds in a thread; keeps every sample and the
    owner of every process it saw (read from /proc at first sight)."""

    command: list[str]
    gpu: int
    interval: float = 0.15
    env: dict[str, str] | None = None
    samples: list[Sample] = field(default_factory=list)
    owners: dict[int, Owner | None] = field(default_factory=dict)
    _uuids: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def retarget(self, env: dict[str, str] | None) -> None:
        with self._lock:
            self.env = env

    def uuid(self, env: dict[str, str] | None) -> str:
        """The watched GPU's UUID (compute-apps names GPUs only so), asked once per target."""
        key = (env or {}).get("EQ_SIM_STATE", "")
        if key not in self._uuids:
            rows = smi(self.command, ["--query-gpu=index,uuid", CSV], env)
            found = [row[1] for row in rows if len(row) > 1 and _int(row[0]) == self.gpu]
            if not found:
                return ""
            self._uuids[key] = found[0]
        return self._uuids[key]

    def read(self, env: dict[str, str] | None) -> Sample | None:
        uuid = self.uuid(env)
        gpus = smi(self.command, [GPU_QUERY, CSV], env)
        before = time.time()
        apps = smi(self.command, [APPS_QUERY, CSV], env)
        after = time.time()
        mine = [row for row in gpus if row and _int(row[0]) == self.gpu]
        if not mine or not uuid:
            return None
        held = tuple(App(_int(row[0]), _int(row[2])) for row in apps
                     if len(row) > 2 and row[1] == uuid)
        row = mine[0]
        return Sample((before + after) / 2, _int(row[1]), _int(row[2]), _int(row[3]),
                      held)

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            with self._lock:
                env = self.env
            sample = self.read(env)
            if sample is not None:
                for app in sample.apps:
                    if app.pid not in self.owners:
                        self.owners[app.pid] = process_owner(app.pid)
                self.samples.append(sample)
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="nvidia-smi sampler",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    def window(self, start: float, end: float) -> list[Sample]:
        return [s for s in list(self.samples) if start <= s.t <= end]

    def dump(self, path: Path) -> None:
        """Every sample and owner as JSON lines (kept with --keep, for a second look)."""
        with open(path, "w") as out:
            for sample in list(self.samples):
                out.write(json.dumps(dataclasses.asdict(sample)) + "\n")
            for pid, owner in list(self.owners.items()):
                out.write(json.dumps({"pid": pid, "owner": owner and dataclasses.asdict(owner)})
                          + "\n")

    def pids_of(self, project: str, job: str | None = None) -> set[int]:
        return {pid for pid, owner in list(self.owners.items()) if owner is not None
                and owner.project == project and (job is None or owner.job == job)}

    def own_session(self, pid: int) -> bool:
        """Did the process lead a session of its own (left by its job with `setsid`)?"""
        owner = self.owners.get(pid)
        return owner is not None and owner.session == pid


# -- the jobs: torch on a real GPU, fake-train on a simulated one --------------------------

@dataclass(frozen=True)
class TorchJobs:
    """Real CUDA jobs (bench/gpu_jobs/torch_job.py) on this machine's GPU `gpu`."""

    gpu: int
    python: str = sys.executable
    mode: str = "gpu"

    @property
    def host(self) -> str:
        return f"{{name: local, gpus: [{self.gpu}]}}"

    @property
    def smi(self) -> list[str]:
        return ["nvidia-smi"]

    def sampler_env(self, run_dir: Path) -> dict[str, str] | None:
        return None

    def _run(self, *args: object) -> str:
        return shlex.join([self.python, str(JOB_SCRIPT), *map(str, args)])

    def train(self, mib: int, seconds: float) -> str:
        return self._run("train", "--mib", mib, "--seconds", f"{seconds:g}")

    def oom_once(self, mib: int, seconds: float, total_mib: int) -> str:
        return self._run("oom-once", "--mib", mib, "--seconds", f"{seconds:g}")

    def oom_always(self) -> str:
        return self._run("oom-always", "--gib", 200)

    def hang(self, mib: int) -> str:
        return self._run("hang", "--mib", mib)

    def leak(self, mib: int, child_mib: int, seconds: float) -> str:
        return self._run("leak", "--mib", mib, "--child-mib", child_mib, "--seconds",
                         f"{seconds:g}")

    def silent_since(self, log: str, run_dir: Path, job: str) -> float | None:
        for line in reversed(log.splitlines()):
            if "silent from t=" in line:
                return float(line.rsplit("t=", 1)[1].split()[0])
        return None


@dataclass(frozen=True)
class SimJobs:
    """fake-train jobs on eq-tui's simulated GPU (one H100-sized card per run)."""

    gpu: int = 0
    mode: str = "sim"
    host: str = (f'{{name: sim, simulate: {{gpus: 1, memory_mib: {SIM_MEMORY_MIB}, '
                 f'model: "{SIM_MODEL}"}}}}')

    @property
    def smi(self) -> list[str]:
        from eq_tui.sim.state import sim_bin_dir

        return [str(sim_bin_dir() / "nvidia-smi")]

    def sampler_env(self, run_dir: Path) -> dict[str, str] | None:
        """The run's simulated GPU state, made before eq-tui starts so sampling can begin."""
        from eq_tui.hosts.factory import sim_state_dir
        from eq_tui.sim.state import init_sim_state

        state = sim_state_dir(run_dir, "sim")
        init_sim_state(state, host="sim", gpus=1, memory_mib=SIM_MEMORY_MIB, model=SIM_MODEL)
        return {**os.environ, "EQ_SIM_STATE": str(state)}

    def train(self, mib: int, seconds: float) -> str:
        epochs = max(1, round(seconds))
        return (f"fake-train --epochs {epochs} --epoch-seconds {seconds / epochs:g} "
                f"--mem {mib + TORCH_OVERHEAD_MIB}")

    def oom_once(self, mib: int, seconds: float, total_mib: int) -> str:
        # as the torch job: attempt 1 holds half the card, then asks 70 % of it more
        first = (f"fake-train --epochs 1 --epoch-seconds 0.2 --mem {total_mib // 2} "
                 f"--alloc {total_mib * 7 // 10}")
        return (f'if [ "$EQ_ATTEMPT" = 1 ]; then {first}; '
                f"else {self.train(mib, seconds)}; fi")

    def oom_always(self) -> str:
        return "fake-train --epochs 1 --epoch-seconds 0.5 --mem 600 --alloc 204800"

    def hang(self, mib: int) -> str:
        # the torch job's only line comes after torch's import and CUDA init; without the
        # sleep it would come before eq-tui's first probe of the job, which a torch job's never
        # does
        return (f"sleep {TORCH_INIT_S:g}; fake-train --epochs 1 --mem {mib + TORCH_OVERHEAD_MIB}"
                " --hang-after 0")

    def leak(self, mib: int, child_mib: int, seconds: float) -> str:
        return (f"{self.train(mib, seconds)} --leak-child {child_mib} --leak-detach "
                "--stale-child-seconds 600")

    def silent_since(self, log: str, run_dir: Path, job: str) -> float | None:
        from eq_tui.hosts.factory import sim_state_dir
        from eq_tui.sim.state import read_runs

        hangs = [e for e in read_runs(sim_state_dir(run_dir, "sim"))
                 if e["event"] == "hang" and e["job"] == job]
        return float(hangs[0]["t"]) if hangs else None


Jobs = TorchJobs | SimJobs


# -- one eq-tui run ------------------------------------------------------------------------

@dataclass
class Run:
    """One `eq-tui MANIFEST --no-ui` run and what it left in its run dir."""

    name: str
    project: str
    run_dir: Path
    started: float
    ended: float
    exit_code: int
    output: str
    state: dict[str, Any]
    events: list[dict[str, Any]]

    def job(self, job_id: str) -> dict[str, Any]:
        return next(j for j in self.state.get("jobs", []) if j["id"] == job_id)

    def attempts(self, job_id: str) -> list[dict[str, Any]]:
        return list(self.job(job_id).get("history", []))

    def of_type(self, kind: str, job: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind
                and (job is None or e.get("job") == job)]

    def log(self, job_id: str, attempt: int = -1) -> str:
        try:
            return Path(self.attempts(job_id)[attempt]["log"]).read_text(errors="replace")
        except (OSError, IndexError, KeyError):
            return ""


def manifest_text(jobs: Jobs, project: str, cwd: Path, poll: float, body: str) -> str:
    return (f"project: {project}\nlauncher: tmux\ncwd: {cwd}\npoll: {poll:g}\n"
            f"hosts:\n  - {jobs.host}\n{body}")


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def read_state(run_dir: Path) -> dict[str, Any]:
    try:
        state: dict[str, Any] = json.loads((run_dir / "queue_state.json").read_text())
    except (OSError, ValueError):
        return {}
    return state


def eq_env() -> dict[str, str]:
    """eq-tui from this checkout (the commit the figures name), whatever else is installed."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT),
            "PYTHONUNBUFFERED": "1"}


def eq_tui(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "eq_tui", *args], capture_output=True,
                          text=True, env=eq_env(), timeout=timeout, check=False)


def run_eq(jobs: Jobs, sampler: Sampler, work: Path, name: str, body: str, *, poll: float,
           timeout: float, during: Callable[[Path], bool] | None = None) -> Run:
    """Write the manifest, run eq-tui on it to the end (`during(run_dir)` is called every
    0.25 s until it returns True), and read its records."""
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    project = f"gpucheck_{name}"
    manifest = folder / f"{name}.yaml"
    manifest.write_text(manifest_text(jobs, project, folder, poll, body))
    run_dir = folder / "run"
    sampler.retarget(jobs.sampler_env(run_dir))
    time.sleep(3 * sampler.interval)  # a few idle samples before the first launch
    started = time.time()
    with open(folder / "eq-tui.out", "w") as out:
        engine = subprocess.Popen(
            [sys.executable, "-m", "eq_tui", str(manifest), "--no-ui", "--run-dir",
             str(run_dir)], stdout=out, stderr=subprocess.STDOUT, env=eq_env(), cwd=folder)
        done = during is None
        while engine.poll() is None:
            if time.time() - started > timeout:
                engine.terminate()
                engine.wait(30)
                break
            if not done:
                assert during is not None
                done = during(run_dir)
            time.sleep(0.25)
    ended = time.time()
    time.sleep(2.0)  # the sampler sees the card settle after the run
    return Run(name, project, run_dir, started, ended, engine.returncode,
               (folder / "eq-tui.out").read_text(errors="replace"), read_state(run_dir),
               read_json_lines(run_dir / "events.jsonl"))


@dataclass
class Section:
    """One run's figures (for the JSON), table rows and pass/fail checks."""

    name: str
    figures: dict[str, Any] = field(default_factory=dict)
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)
    checks: dict[str, bool] = field(default_factory=dict)

    def row(self, figure: str, smi: object = "-", eq: object = "-",
            check: tuple[str, bool] | None = None) -> None:
        verdict = "-"
        if check is not None:
            self.checks[check[0]] = check[1]
            verdict = "ok" if check[1] else "FAIL"
        self.rows.append((figure, show(smi), show(eq), verdict))


def show(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def jobs_yaml(entries: Iterable[tuple[str, str, int | None]]) -> str:
    """The jobs' manifest lines. A run's jobs are often copies of one command (a card packed
    with the same job), which a manifest refuses unless meant: each command says so with its
    job's id, in a no-op (`:`) before it (a compound command stays whole)."""
    lines = []
    for job_id, command, mem in entries:
        cmd = f": {job_id}; {command}"
        quoted = cmd.replace("\\", "\\\\").replace('"', '\\"')
        extra = "" if mem is None else f", mem_mib: {mem}"
        lines.append(f'  - {{id: {job_id}, cmd: "{quoted}"{extra}}}')
    return "jobs:\n" + "\n".join(lines) + "\n"
