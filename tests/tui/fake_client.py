"""An in-memory EngineClient: a hand-built snapshot, events pushed by the test, commands recorded
and answered with simple state changes (for deterministic UI tests and snapshots)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from eq_tui.api.commands import Command
from eq_tui.api.events import Event, JobUpdated, QueuePaused
from eq_tui.present.queue_eta import EtaBook

T0 = 1_700_000_000.0  # the fixed clock the sample data is built around


def attempt(n: int, host: str, gpu: int, start: float, end: float | None = None,
            exit_code: int | None = None, failure_class: str | None = None) -> dict[str, Any]:
    directory = f"/logs/attempt{n}"
    return {"n": n, "host": host, "gpus": [gpu], "session": f"eq_s{n}", "attempt_dir": directory,
            "log": f"{directory}/log", "start": start, "end": end, "exit_code": exit_code,
            "failure_class": failure_class, "decided_at": start, "launched": True}


def job(job_id: str, status: str, *, phase: str = "train", history: list[dict[str, Any]] | None
        = None, failure: tuple[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    history = history or []
    last = history[-1] if history else None
    record: dict[str, Any] = {
        "id": job_id, "phase": phase, "cmd": f"fake-train --id {job_id}", "status": status,
        "attempts": len(history), "host": last["host"] if last else None,
        "gpus": last["gpus"] if last else [], "started": last["start"] if last else None,
        "ended": last["end"] if last else None, "log": last["log"] if last else None,
        "failure": {"class": failure[0], "detail": failure[1]} if failure else None,
        "history": history, "retry_at": None, "reason": None, "lost_requeues": 0,
        "retries_by_class": {}, "exited_seen_at": None, "last_line": ""}
    record.update(extra)
    return record


def gpu(index: int, used: int, total: int, *, job_id: str | None = None, util: int = 0,
        other: bool = False, settling: bool = False, quarantined: bool = False,
        name: str = "NVIDIA GeForce RTX 4090 (sim)") -> dict[str, Any]:
    return {"index": index, "uuid": f"GPU-{index}", "name": name, "memory_used_mib": used,
            "memory_total_mib": total, "utilization_pct": util, "allowed": True, "job": job_id,
            "other": other, "settling": settling, "quarantined": quarantined}


def sample_snapshot(project: str = "demo") -> dict[str, Any]:
    jobs = [
        job("train_lr0.1_s1", "completed",
            history=[attempt(1, "rtx-box", 0, T0 - 600, T0 - 480, 0)]),
        job("train_lr0.1_s2", "completed",
            history=[attempt(1, "rtx-box", 1, T0 - 600, T0 - 420, 0)]),
        job("train_lr0.03_s1", "running", history=[attempt(1, "rtx-box", 0, T0 - 95)],
            last_line="epoch 3/6 loss 0.412"),
        job("train_lr0.03_s2", "running", history=[attempt(1, "a100-box", 0, T0 - 30)],
            last_line="epoch 1/6 loss 0.833"),
        job("student_s2", "failed_oom", phase="distill",
            history=[attempt(1, "rtx-box", 2, T0 - 70, T0 - 50, 1, "cuda_oom")],
            failure=("cuda_oom", "torch.OutOfMemoryError: CUDA out of memory"),
            retry_at=T0 + 7),
        job("student_nan", "stuck", phase="distill",
            history=[attempt(1, "a100-box", 1, T0 - 200, T0 - 150, 3, "exit_nonzero")],
            failure=("exit_nonzero", "exit 3: ValueError: lr too high for this seed"),
            reason="exit 3: ValueError: lr too high for this seed"),
        job("student_big", "stuck", phase="distill",
            history=[attempt(n, "rtx-box", 3, T0 - 400 + 60 * n, T0 - 380 + 60 * n, 1,
                             "cuda_oom") for n in (1, 2, 3)],
            failure=("cuda_oom", "torch.OutOfMemoryError: CUDA out of memory")),
        job("student_s7", "blocked", phase="eval",
            failure=("dependency", "distill has a stuck job"),
            reason="distill has a stuck job"),
        job("student_s8", "pending", phase="distill", reason="waiting for a free GPU"),
        job("student_s9", "pending", phase="distill"),
    ]
    return {
        "project": project, "run_dir": "/nonexistent/run", "paused": False,
        "started_at": T0 - 620, "created": T0 - 620, "now": T0, "finished": False,
        "exit_code": None,
        "settings": {"max_attempts": 3, "oom_delay": 8, "threshold_mib": 500, "waves": "rolling",
                     "poll": 1.0, "pid": 1},
        "jobs": jobs,
        "hosts": [
            {"name": "rtx-box", "kind": "sim", "state": "up", "reason": "", "since": T0 - 620,
             "rtt_s": 0.012, "stopped": None,
             "gpus": [gpu(0, 9000, 24576, job_id="train_lr0.03_s1", util=87),
                      gpu(1, 0, 24576),
                      gpu(2, 6000, 24576, settling=True),
                      gpu(3, 4000, 24576, other=True, util=12)]},
            {"name": "a100-box", "kind": "sim", "state": "up", "reason": "", "since": T0 - 620,
             "rtt_s": 0.034, "stopped": None,
             "gpus": [gpu(0, 12000, 81920, job_id="train_lr0.03_s2", util=64,
                          name="NVIDIA A100-SXM4-80GB (sim)"),
                      gpu(1, 0, 81920, quarantined=True, name="NVIDIA A100-SXM4-80GB (sim)")]},
        ],
        "alerts": [{"type": "alert", "project": project, "at": T0 - 150, "level": "warning",
                    "message": "a100-box: GPU [1] quarantined after Xid 79", "host": "a100-box",
                    "job": "student_nan"}],
    }


class FakeClient:
    """Implements EngineClient over a snapshot; `publish` pushes events to subscribers."""

    def __init__(self, snapshot: dict[str, Any] | None = None, *, clock: Any = lambda: T0,
                 tails: dict[tuple[str, int | None], list[str]] | None = None) -> None:
        self.state = copy.deepcopy(snapshot or sample_snapshot())
        self.project: str = self.state["project"]
        self.clock = clock
        self.tails = tails if tails is not None else {}
        self.commands: list[tuple[str, list[str] | None]] = []
        self.command_args: list[dict[str, Any]] = []
        self.sent: list[Command] = []  # the typed commands, as the UI built them
        self.tail_calls: list[tuple[str, int | None]] = []
        self.fail_commands = False
        self.reloaded = False
        self._queues: list[asyncio.Queue[Event]] = []

    def snapshot(self) -> dict[str, Any]:
        state = copy.deepcopy(self.state)
        if "eta_s" not in state:  # what an engine publishes: its ETA of these jobs, now
            book = EtaBook()
            for record in state.get("jobs") or []:
                book.update(str(record["id"]), record)
            state["eta_s"], state["eta_at"] = book.eta(self.clock()), self.clock()
        return state

    def subscribe(self) -> asyncio.Queue[Event]:
        queue: asyncio.Queue[Event] = asyncio.Queue()
        self._queues.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        if queue in self._queues:
            self._queues.remove(queue)

    def publish(self, event: Event) -> None:
        for queue in self._queues:
            queue.put_nowait(event)

    def job(self, job_id: str) -> dict[str, Any]:
        return next(j for j in self.state["jobs"] if j["id"] == job_id)

    def set_job(self, job_id: str, **changes: Any) -> None:
        record = self.job(job_id)
        record.update(changes)
        self.publish(JobUpdated(project=self.project, at=self.clock(), job=job_id,
                                state=copy.deepcopy(record)))

    async def command(self, name: str, job_ids: list[str] | None = None,
                      args: dict[str, Any] | None = None,
                      command_id: str | None = None) -> dict[str, Any]:
        self.commands.append((name, job_ids))
        self.command_args.append(dict(args or {}))
        if self.fail_commands:
            raise ConnectionError("control socket closed")
        if name == "shutdown":
            return {"ok": True, "results": {}, "error": None}
        if name in ("pause", "resume"):
            self.state["paused"] = name == "pause"
            self.publish(QueuePaused(project=self.project, at=self.clock(),
                                     paused=self.state["paused"]))
            return {"ok": True, "results": {}, "error": None}
        if name == "release-gpu":
            return {"ok": True, "results": {t: "ok" for t in job_ids or []}, "error": None}
        if name in ("priority", "edit", "clone", "add", "reload"):
            return self._living(name, job_ids or [], args or {})
        new_status = {"kill": "killed", "retry": "pending", "requeue": "pending",
                      "hold": "held", "release": "pending"}[name]
        for job_id in job_ids or []:
            self.set_job(job_id, status=new_status)
        return {"ok": True, "results": {j: "ok" for j in job_ids or []}, "error": None}

    async def send(self, command: Command, command_id: str | None = None) -> dict[str, Any]:
        self.sent.append(command)
        name, targets, arguments = command.wire()
        return await self.command(name, targets, arguments, command_id)

    def _living(self, name: str, job_ids: list[str], args: dict[str, Any]) -> dict[str, Any]:
        """What the engine does for these, on the fake's records (the engine's own are tested
        against a real one)."""
        ok = {"ok": True, "results": {j: "ok" for j in job_ids}, "error": None}
        if name == "priority":
            for job_id in job_ids:
                self.set_job(job_id, priority=int(self.job(job_id).get("priority") or 0)
                             + int(args.get("delta", 0)))
        elif name == "edit":
            for job_id in job_ids:
                old = self.job(job_id)["cmd"]
                self.set_job(job_id, cmd=args["cmd"], status="pending",
                             edits=[{"kind": "edit", "old": old, "new": args["cmd"]}])
        elif name in ("clone", "add"):
            record = job(args["id"], "pending", phase=args.get("phase") or
                         self.job(job_ids[0])["phase"])
            record["cmd"] = args["cmd"]
            self.state["jobs"].append(record)
            self.publish(JobUpdated(project=self.project, at=self.clock(), job=args["id"],
                                    state=copy.deepcopy(record)))
            ok["results"] = {args["id"]: "ok"}
        elif name == "reload":
            ok["detail"] = {"dry_run": bool(args.get("dry_run")), "add": ["new_job"],
                            "update": [], "retire": ["student_s9"], "kept": {},
                            "not_applied": []}
            if not args.get("dry_run"):
                self.reloaded = True
        return ok

    async def tail(self, job_id: str, attempt: int | None = None, lines: int = 200) -> list[str]:
        self.tail_calls.append((job_id, attempt))
        return list(self.tails.get((job_id, attempt), [f"{job_id} attempt {attempt} line 1",
                                                       f"{job_id} attempt {attempt} line 2"]))


def node(name: str, state: str, used: int, total: int = 4,
         jobs: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "state": state, "gpus_used": used, "gpus_total": total,
            "jobs": list(jobs)}


def slurm_snapshot(project: str = "demo") -> dict[str, Any]:
    """The sample plus a Slurm host with 4 job slots: student_s8 runs on gpu01, student_s9 is
    submitted and queued; gpu02 drains, gpu03 is idle."""
    snapshot = sample_snapshot(project)
    for job_id in ("student_s8", "student_s9"):
        record = next(j for j in snapshot["jobs"] if j["id"] == job_id)
        slot = 0 if job_id == "student_s8" else 1
        record.update(job(job_id, "running", phase="distill",
                          history=[attempt(1, "cluster", slot, T0 - 40)]))
    snapshot["jobs"][-1]["reason"] = "PENDING (Resources)"
    slots = [gpu(i, 0, 1, name="Slurm slot (gpu)") for i in range(4)]
    slots[0]["job"], slots[1]["job"] = "student_s8", "student_s9"
    snapshot["hosts"].append({
        "name": "cluster", "kind": "slurm", "state": "up", "reason": "", "since": T0 - 620,
        "rtt_s": 0.021, "stopped": None, "gpus": slots,
        "nodes": [node("gpu01", "MIXED", 3, jobs=("student_s8",)),
                  node("gpu02", "MIXED+DRAIN", 1),
                  node("gpu03", "IDLE", 0)]})
    return snapshot


MODELS = ("NVIDIA GeForce RTX 4090 (sim)", "NVIDIA A100-SXM4-80GB (sim)")


def fleet_snapshot(hosts: int, gpus: int = 4, project: str = "fleet",
                   jobs_per_gpu: float = 1.5) -> dict[str, Any]:
    """`hosts` hosts of `gpus` GPUs (named gpu-node-01…): most GPUs run one of our jobs, one
    host in eight is down, one GPU in eleven belongs to another process, one in seventeen is
    quarantined; the jobs beyond the running ones are completed, pending, stuck or blocked."""
    host_records, jobs = [], []
    running = 0
    for h in range(hosts):
        name = f"gpu-node-{h + 1:02d}"
        model = MODELS[h % 2]
        total = 24576 if h % 2 == 0 else 81920
        down = hosts > 2 and h % 8 == 7
        records = []
        for g in range(gpus):
            slot = h * gpus + g
            if slot % 17 == 5:
                records.append(gpu(g, 0, total, quarantined=True, name=model))
            elif slot % 11 == 3:
                records.append(gpu(g, total // 3, total, other=True, util=40, name=model))
            elif down or slot % 5 == 4:
                records.append(gpu(g, 0, total, name=model))
            else:
                running += 1
                job_id = f"run_{running:03d}"
                records.append(gpu(g, total * (1 + slot % 7) // 8, total, job_id=job_id,
                                   util=50 + slot % 50, name=model))
                jobs.append(job(job_id, "running", phase="train" if slot % 3 else "eval",
                                history=[attempt(1, name, g, T0 - 60 - 13 * slot)],
                                last_line=f"epoch {1 + slot % 8}/8 loss 0.{slot:03d}"))
        host_records.append({
            "name": name, "kind": "sim", "state": "down" if down else "up",
            "reason": "ssh: connection refused" if down else "", "since": T0 - 620,
            "rtt_s": None if down else 0.004 + 0.001 * (h % 9), "stopped": None,
            "gpus": [] if down else records})
    extra = max(4, int(hosts * gpus * jobs_per_gpu) - running)
    for i in range(extra):
        job_id = f"sweep_{i:03d}"
        if i % 9 == 0:
            jobs.append(job(job_id, "stuck", phase="train", failure=(
                "exit_nonzero", "exit 1: RuntimeError: NaN loss"), history=[
                attempt(1, "gpu-node-01", 0, T0 - 500, T0 - 450, 1, "exit_nonzero")]))
        elif i % 9 == 1:
            jobs.append(job(job_id, "failed_oom", phase="train", retry_at=T0 + 5 + i, history=[
                attempt(1, "gpu-node-02", 1, T0 - 90, T0 - 80, 1, "cuda_oom")],
                failure=("cuda_oom", "torch.OutOfMemoryError")))
        elif i % 3 == 0:
            jobs.append(job(job_id, "completed", phase="train", history=[
                attempt(1, f"gpu-node-{1 + i % hosts:02d}", i % gpus, T0 - 600, T0 - 300, 0)]))
        else:
            jobs.append(job(job_id, "pending", phase="eval" if i % 2 else "train"))
    snapshot = sample_snapshot(project)
    snapshot.update(jobs=jobs, hosts=host_records, alerts=[])
    return snapshot


A100 = "NVIDIA A100-SXM4-80GB (sim)"


def shared_attempt(n: int, host: str, gpu_index: int, start: float, *, estimate: int | None,
                   peak: int | None, **extra: Any) -> dict[str, Any]:
    record = attempt(n, host, gpu_index, start, **extra)
    record.update(estimate_mib=estimate, peak_mib=peak, shared=estimate is not None)
    return record


def packed_snapshot(project: str = "demo") -> dict[str, Any]:
    """The sample, with a100-box's jobs placed by memory: GPU 0 shared by three jobs (one just
    started: it holds its estimate, uses nothing yet), GPU 1 by two beside someone else's
    process, GPU 2 one job alone, GPU 3 quarantined; a CPU-only job; two jobs waiting after CUDA
    OOMs on a shared GPU (the next asks 1.5x its estimate, the other its GPU alone); one waiting
    for room."""
    snapshot = sample_snapshot(project)
    jobs = snapshot["jobs"]
    sharing = {0: [("sweep_lr0.1_s1", 18432, 17612), ("sweep_lr0.1_s2", 18432, 16900),
                   ("sweep_lr0.3_s1", 18432, 0)],
               1: [("eval_a", 12288, 12000), ("eval_b", 12288, 6000)]}
    for index, placed in sharing.items():
        for k, (job_id, mib, used) in enumerate(placed):
            jobs.append(job(job_id, "running", history=[shared_attempt(
                1, "a100-box", index, T0 - 300 + 40 * k, estimate=mib, peak=used or None)],
                last_line=f"step {100 * (k + 1)} loss 0.{k + 3}1"))
    train = next(j for j in jobs if j["id"] == "train_lr0.03_s2")
    train.update(job("train_lr0.03_s2", "running", history=[shared_attempt(
        1, "a100-box", 2, T0 - 30, estimate=None, peak=30822)], last_line="epoch 1/6 loss 0.833"))
    jobs.append(job("prep_cpu", "running", phase="prep",
                    history=[attempt(1, "a100-box", 0, T0 - 50)], last_line="tokenised 41%"))
    jobs[-1]["gpus"] = jobs[-1]["history"][0]["gpus"] = []
    oom = ("cuda_oom", "torch.OutOfMemoryError: CUDA out of memory")
    jobs.append(job("sweep_lr1_s1", "failed_oom", failure=oom, retry_at=T0 + 12, mem_escalation=1,
                    next_ask_level=1, next_ask_mib=15360,
                    history=[shared_attempt(1, "a100-box", 1, T0 - 90, estimate=10240,
                                            peak=10300, end=T0 - 20, exit_code=1,
                                            failure_class="cuda_oom")]))
    jobs.append(job("sweep_lr1_s2", "failed_oom", failure=oom, retry_at=T0 + 30, mem_escalation=2,
                    next_ask_level=2, next_ask_mib=None,
                    history=[shared_attempt(n, "a100-box", 0, T0 - 400 + 150 * n,
                                            estimate=10240 * (3 if n == 2 else 2) // 2,
                                            peak=15500, end=T0 - 390 + 150 * n, exit_code=1,
                                            failure_class="cuda_oom") for n in (1, 2)]))
    jobs.append(job("sweep_lr3_s1", "pending",
                    reason="a100-box GPU 1 has 30.0 GiB free of 80; needs 41.0"))

    def on(index: int, other_mib: int = 0) -> dict[str, Any]:
        placed = sharing[index]
        record = gpu(index, sum(used for *_, used in placed) + other_mib, 81920,
                     job_id=placed[0][0], util=91 - 20 * index, name=A100)
        record["jobs"] = [{"id": job_id, "mib": mib, "used": used}
                          for job_id, mib, used in placed]
        return record

    alone = gpu(2, 30822, 81920, job_id="train_lr0.03_s2", util=64, name=A100)
    alone["jobs"] = [{"id": "train_lr0.03_s2", "mib": None, "used": 30822}]
    snapshot["hosts"][1]["gpus"] = [on(0, other_mib=600), on(1, other_mib=20480), alone,
                                    gpu(3, 0, 81920, quarantined=True, name=A100)]
    return snapshot
