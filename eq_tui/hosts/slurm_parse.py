"""Slurm CLI output → plain records, and a Slurm job's state → an AttemptProbe. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from eq_tui.hosts.base import AttemptProbe

# Still queued or running: the attempt's "session" is alive.
ALIVE_STATES = frozenset({
    "PENDING", "CONFIGURING", "RUNNING", "SUSPENDED", "COMPLETING", "REQUEUED",
    "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD",
    "STOPPED",
})
# Ended without the job's own exit record: the node or the scheduler took it away.
VANISHED_STATES = frozenset({"PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "REVOKED"})
SIGKILL_EXIT = 137
SIGTERM_EXIT = 143


@dataclass(frozen=True)
class SlurmJob:
    job_id: str
    name: str
    state: str  # base state, e.g. CANCELLED (a "CANCELLED by 0" suffix is dropped)
    reason: str = ""  # squeue's reason for a pending job
    exit_code: int | None = None  # from sacct/scontrol "code:signal"; 128+signal when signalled
    nodes: tuple[str, ...] = ()  # where it runs (squeue's %N, expanded)


def _base_state(raw: str) -> str:
    return raw.strip().split(" ", 1)[0].rstrip("+").upper()


def exit_from_slurm(value: str) -> int | None:
    """Slurm's `ExitCode` is `code:signal`; a job killed by signal N reads as 128+N."""
    code, _, signal = value.strip().partition(":")
    try:
        number, sig = int(code), int(signal or 0)
    except ValueError:
        return None
    return 128 + sig if sig else number


def expand_hostlist(text: str) -> tuple[str, ...]:
    """Slurm's compressed node list → node names: `gpu[01-03,07],login1` → gpu01, gpu02, gpu03,
    gpu07, login1 (zero padding kept; one bracket group per name, as Slurm prints them)."""
    names: list[str] = []
    for match in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?([^,\[]*)", text.strip()):
        head, ranges, tail = match.groups()
        if ranges is None:
            names.append(head + tail)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                names.append(f"{head}[{part}]{tail}")
                continue
            for number in range(int(low), int(high or low) + 1):
                names.append(f"{head}{number:0{len(low)}d}{tail}")
    return tuple(names)


def parse_squeue(text: str, prefix: str = "") -> dict[str, SlurmJob]:
    """`squeue -h -o '%i|%j|%T|%r|%N'` lines → the newest job per name."""
    jobs: dict[str, SlurmJob] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) not in (4, 5) or not parts[1].startswith(prefix):
            continue
        job_id, name, state, reason = parts[:4]
        reason = "" if reason in ("None", "(null)") else reason
        nodes = expand_hostlist(parts[4]) if len(parts) == 5 and parts[4] not in (
            "", "(null)", "n/a") else ()
        _keep_newest(jobs, SlurmJob(job_id, name, _base_state(state), reason, nodes=nodes))
    return jobs


def parse_sacct(text: str, names: frozenset[str]) -> dict[str, SlurmJob]:
    """`sacct -n -P -X -o JobIDRaw,JobName,State,ExitCode` (or `sacct -c`) → newest per name.

    `sacct -c` ignores --name, so the filter is applied here."""
    jobs: dict[str, SlurmJob] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 4 or parts[1] not in names or "." in parts[0]:
            continue
        _keep_newest(jobs, SlurmJob(parts[0], parts[1], _base_state(parts[2]),
                                    exit_code=exit_from_slurm(parts[3])))
    return jobs


def parse_scontrol_jobs(text: str, names: frozenset[str]) -> dict[str, SlurmJob]:
    """`scontrol show job -o` (one job a line, key=value) → newest per name."""
    jobs: dict[str, SlurmJob] = {}
    for line in text.splitlines():
        fields = _key_values(line)
        name = fields.get("JobName", "")
        if name in names and "JobId" in fields:
            _keep_newest(jobs, SlurmJob(fields["JobId"], name,
                                        _base_state(fields.get("JobState", "")),
                                        reason=fields.get("Reason", ""),
                                        exit_code=exit_from_slurm(fields.get("ExitCode", ""))))
    return jobs


def _key_values(line: str) -> dict[str, str]:
    fields = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
    return fields


def _job_number(job_id: str) -> int:
    digits = re.match(r"\d+", job_id)
    return int(digits.group()) if digits else -1


def _keep_newest(jobs: dict[str, SlurmJob], job: SlurmJob) -> None:
    old = jobs.get(job.name)
    if old is None or _job_number(job.job_id) >= _job_number(old.job_id):
        jobs[job.name] = job


def pending_detail(job: SlurmJob) -> str:
    return f"{job.state} ({job.reason})" if job.reason else job.state


def needs_lookup(job: SlurmJob | None, files: AttemptProbe) -> bool:
    """A finished attempt without its own exit record: ask sacct/scontrol how it ended and
    read its log tail (probe.sh reads the tail only once an exit record exists)."""
    return files.exit_code is None and (job is None or job.state not in ALIVE_STATES)


def attempt_from_slurm(files: AttemptProbe, job: SlurmJob | None, *,
                       log_tail: str = "") -> AttemptProbe:
    """Combine what the attempt dir says (probe.sh) with what Slurm says about the job.

    The pid in the attempt dir belongs to a compute node, so liveness comes from Slurm alone.
    """
    if job is not None and job.state in ALIVE_STATES and not (
            job.state == "COMPLETING" and files.exit_code is not None):
        detail = pending_detail(job) if job.state != "RUNNING" else ""
        return replace(files, session_alive=True, pid_alive=job.state != "PENDING",
                       detail=detail)
    ended = replace(files, session_alive=False, pid_alive=False, detail="")
    if files.exit_code is not None:
        if job is not None and job.state == "OUT_OF_MEMORY":
            return replace(ended, detail="OUT_OF_MEMORY",
                           log_tail=_with_note(files.log_tail, job))
        return ended
    if job is None or job.state in VANISHED_STATES or job.state == "COMPLETED":
        # No exit record: the wrapper never finished (node lost, preempted, or the job was
        # removed). The engine treats that as lost and requeues once.
        detail = job.state if job is not None else "not known to Slurm"
        return replace(ended, exit_code=None, detail=detail)
    tail = _with_note(log_tail, job)
    if job.state == "OUT_OF_MEMORY":
        return replace(ended, exit_code=SIGKILL_EXIT, log_tail=tail, detail="OUT_OF_MEMORY",
                       exited_at=files.exited_at)
    if job.state == "TIMEOUT":
        code = job.exit_code if job.exit_code not in (None, 0) else SIGTERM_EXIT
        return replace(ended, exit_code=code, log_tail=tail, detail="TIMEOUT")
    if job.state == "CANCELLED":
        code = job.exit_code if job.exit_code not in (None, 0) else SIGTERM_EXIT
        return replace(ended, exit_code=code, log_tail=tail, detail="CANCELLED")
    # FAILED (or anything else that ended) without the wrapper's record: Slurm's exit code.
    code = job.exit_code if job.exit_code not in (None, 0) else 1
    return replace(ended, exit_code=code, log_tail=tail, detail=job.state)


def _with_note(log_tail: str, job: SlurmJob) -> str:
    note = f"[eq-tui] Slurm job {job.job_id} ended {job.state}"
    if job.exit_code is not None:
        note += f" (exit {job.exit_code})"
    return f"{log_tail.rstrip(chr(10))}\n{note}\n" if log_tail.strip() else note + "\n"


@dataclass(frozen=True)
class NodeGpus:
    node: str
    state: str
    partitions: tuple[str, ...]
    gpus_total: int
    gpus_used: int


def _gres_count(value: str) -> int:
    """`gpu:4`, `gpu:a100:4(S:0-1)`, `gpu:2(IDX:0-1)`, comma-joined → GPUs in all (N/A,
    (null) and other GRES count nothing)."""
    total = 0
    for part in re.sub(r"\([^)]*\)", "", value).split(","):
        pieces = part.strip().split(":")
        if pieces[0] != "gpu":
            continue
        # `gpu` or `gpu:a100` alone is one GPU
        total += int(pieces[-1]) if len(pieces) >= 2 and pieces[-1].isdigit() else 1
    return total


def parse_nodes(text: str, partition: str | None = None) -> list[NodeGpus]:
    """`scontrol show node -o -d` → each node's GPUs allocated / total."""
    nodes = []
    for line in text.splitlines():
        fields = _key_values(line)
        if "NodeName" not in fields:
            continue
        partitions = tuple(p for p in fields.get("Partitions", "").split(",") if p)
        if partition is not None and partition not in partitions:
            continue
        nodes.append(NodeGpus(node=fields["NodeName"], state=fields.get("State", ""),
                              partitions=partitions,
                              gpus_total=_gres_count(fields.get("Gres", "")),
                              gpus_used=_gres_count(fields.get("GresUsed", ""))))
    return nodes
