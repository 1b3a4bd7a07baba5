"""A Slurm cluster as a host: sbatch / squeue / sacct / scancel through any CommandRunner
(a local subprocess, or an ssh login node).

Slurm owns placement. The engine sees `max_parallel` virtual GPU slots (always free), so it
hands this host at most that many jobs at once; each becomes `sbatch --gres=gpu:N` (no --gres
for a job launched with no GPU: gpus_per_job 0) and Slurm sets CUDA_VISIBLE_DEVICES on the
node; mem_mib and max_jobs_per_gpu change nothing here. The attempt directory (shared between
the login node and the compute nodes) holds the same files as on other hosts — log, pid, pgid,
start, exit, cmd, run.sh — plus `slurm_job_id`. Job names are the engine's session names, so a
job is found again by name after an engine crash and never submitted twice. The same round trip
that asks squeue lists the partition's nodes (GPUs allocated / total, our jobs on them) for the
GPU grid, at most every NODES_EVERY_S.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from eq_tui.errors import HostError
from eq_tui.hosts.base import (
    PERSON_STOP,
    AttemptProbe,
    ClusterNode,
    GpuReading,
    HostSnapshot,
    LauncherName,
    LaunchRequest,
    PreflightFinding,
    PreflightRequest,
    ProbeRequest,
    Stop,
    Stopped,
)
from eq_tui.hosts.runner import CommandRunner
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.hosts.shell_protocol import (
    PROBE_TIMEOUT_S,
    hex_lines,
    launch_stdin,
    new_boundary,
    parse_probe,
    probe_stdin,
    script,
    split_sections,
)
from eq_tui.hosts.slurm_parse import (
    NodeGpus,
    SlurmJob,
    attempt_from_slurm,
    needs_lookup,
    parse_nodes,
    parse_sacct,
    parse_scontrol_jobs,
    parse_squeue,
)
from eq_tui.manifest.model import HostSpec, SlurmSpec

# Set per job by Slurm on the node; the engine's value names a virtual slot.
_SLURM_OWNED_ENV = frozenset({"CUDA_VISIBLE_DEVICES"})
# `scontrol show node` is heavier than squeue on a big cluster: the node list is refreshed at
# most this often (our jobs' placement comes from squeue, every tick).
NODES_EVERY_S = 5.0
# A job Slurm calls COMPLETED has written its exit record; when the login node does not see it
# yet, that is a shared filesystem's attribute cache (NFS: up to a minute), not a lost job.
EXIT_RECORD_GRACE_S = 90.0


def sbatch_options(spec: SlurmSpec, gpus: int) -> list[str]:
    # --no-requeue: retries are eq-tui's (a new attempt, its own name and dir); a job Slurm
    # requeued by itself would run twice beside the attempt eq-tui starts when it sees it lost.
    # a CPU-only job (launched with no GPU) asks for none: no --gres line at all
    options = [f"--gres=gpu:{gpus}"] if gpus > 0 else []
    options.append("--no-requeue")
    for flag, value in (("--partition", spec.partition), ("--account", spec.account),
                        ("--qos", spec.qos), ("--time", spec.time), ("--mem", spec.mem)):
        if value:
            options.append(f"{flag}={value}")
    if spec.cpus_per_task:
        options.append(f"--cpus-per-task={spec.cpus_per_task}")
    return [*options, *spec.sbatch_args]


def _common_prefix(names: Sequence[str], default: str) -> str:
    """The job names' shared start (eq_<project>_<token>_ in practice): squeue output is
    filtered by it, so other jobs of the same user cost nothing."""
    if not names:
        return default
    prefix = min(names)
    last = max(names)
    while not last.startswith(prefix):
        prefix = prefix[:-1]
    return prefix or default


class SlurmHost:
    """The engine's Host for a Slurm cluster (see the module docstring)."""

    def __init__(self, name: str, runner: CommandRunner, spec: SlurmSpec, *,
                 slots: Sequence[int], log_dir: str | None = None,
                 name_prefix: str = "eq_",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.runner = runner
        self.spec = spec
        self.slots = tuple(slots)
        self.name_prefix = name_prefix
        # The attempt-file side (log root, tail) is exactly a shell host's.
        self._files = ShellHost(name, runner, log_dir=log_dir, query_gpus=False)
        self.lookups = 0
        self._clock = clock
        self.nodes_every_s = NODES_EVERY_S
        self._nodes: tuple[NodeGpus, ...] = ()
        self._nodes_at: float | None = None
        self._nodes_error: str | None = None
        self._no_exit_since: dict[str, float] = {}  # session → when seen COMPLETED, no record

    async def log_root(self, project: str, token: str) -> str:
        return await self._files.log_root(project, token)

    # ---- probe -------------------------------------------------------------------------------

    def _virtual_gpus(self) -> tuple[GpuReading, ...]:
        label = f"Slurm slot ({self.spec.partition or 'default partition'})"
        return tuple(GpuReading(index=i, uuid=f"slurm-{self.name}-{i}", name=label,
                                memory_used_mib=0, memory_total_mib=1, utilization_pct=None)
                     for i in self.slots)

    async def probe(self, request: ProbeRequest) -> HostSnapshot:
        boundary = new_boundary()
        prefix = _common_prefix([ref.session for ref in request.attempts], self.name_prefix)
        list_nodes = (self._nodes_at is None
                      or self._clock() - self._nodes_at >= self.nodes_every_s)
        args = [request.cwd or "-", prefix, "0", boundary, self.spec.partition or "",
                "1" if list_nodes else "0"]
        started = time.monotonic()
        taken_at = time.time()
        try:
            result = await self.runner.run(
                script("slurm_queue.sh") + "\n" + script("probe.sh"), args,
                stdin=probe_stdin(request), timeout=PROBE_TIMEOUT_S)
        except HostError as exc:
            return HostSnapshot(host=self.name, ok=False, taken_at=taken_at, error=str(exc))
        text = result.stdout.decode("utf-8", errors="replace")
        sections = split_sections(text, boundary)
        if sections.codes.get("slurm_rc") != 0:  # the `BOUNDARY slurm_rc N` line: squeue's exit
            detail = " ".join(line.strip() for line in sections.lines.get("slurm", []) if line)
            return HostSnapshot(host=self.name, ok=False, taken_at=taken_at,
                                error=f"squeue failed: {detail[:300] or 'no answer'}")
        files = parse_probe(self.name, text, boundary, request, taken_at=taken_at,
                            rtt_s=time.monotonic() - started)
        if not files.ok:
            return files
        queue = parse_squeue(sections.text("slurm"), prefix)
        if sections.codes.get("nodes_rc") == 0:
            self._nodes = tuple(parse_nodes(sections.text("nodes"), self.spec.partition))
            self._nodes_at = self._clock()
            self._nodes_error = None
        elif "nodes" in sections.lines:
            # kept until a listing works, so the engine alerts once, not every refresh
            detail = " ".join(line.strip() for line in sections.lines["nodes"] if line.strip())
            self._nodes_error = f"node list unavailable: {detail[:200] or 'no answer'}"
            self._nodes_at = self._clock()
        sessions = {ref.key: ref.session for ref in request.attempts}
        jobs = {key: queue.get(session) for key, session in sessions.items()}
        # squeue's COMPLETED needs no lookup: its exit record is only late (see below)
        ended = [key for key, probe in files.attempts.items() if needs_lookup(jobs[key], probe)
                 and getattr(jobs[key], "state", None) != "COMPLETED"]
        tails: dict[str, str] = {}
        unanswered: set[str] = set()
        if ended:
            looked_up = await self._lookup(
                [(key, sessions[key]) for key in ended],
                {ref.key: ref.attempt_dir for ref in request.attempts})
            if looked_up is None:
                unanswered = {key for key in ended if jobs[key] is None}
            else:
                found, tails = looked_up
                jobs.update({key: found.get(sessions[key]) or jobs[key] for key in ended})
        attempts: dict[str, AttemptProbe] = {}
        now = self._clock()
        waiting_for_record: dict[str, float] = {}
        for key, probe in files.attempts.items():
            job = jobs[key]
            if key in unanswered:
                # Unknown this tick is not "vanished": never requeue on a failed lookup.
                attempts[key] = replace(probe, session_alive=True, pid_alive=False,
                                        detail="waiting for Slurm's record of this job")
                continue
            if job is not None and job.state == "COMPLETED" and probe.exit_code is None:
                since = waiting_for_record[job.name] = self._no_exit_since.get(job.name, now)
                if now - since < EXIT_RECORD_GRACE_S:
                    attempts[key] = replace(probe, session_alive=True, pid_alive=False,
                                            detail="COMPLETED; waiting for its exit record")
                    continue
            attempts[key] = attempt_from_slurm(probe, job, log_tail=tails.get(key, ""))
        self._no_exit_since = waiting_for_record
        alive = {sessions[key] for key, probe in attempts.items() if probe.session_alive}
        warnings = files.warnings + ((self._nodes_error,) if self._nodes_error else ())
        return replace(files, gpus=self._virtual_gpus(), processes=(),
                       sessions=frozenset(alive), attempts=attempts, warnings=warnings,
                       nodes=self._cluster_nodes(jobs), rtt_s=time.monotonic() - started)

    def _cluster_nodes(self, jobs: Mapping[str, SlurmJob | None]) -> tuple[ClusterNode, ...]:
        """The last node list, with the jobs of ours that squeue says run on each node now."""
        on_node: dict[str, list[str]] = {}
        for key, job in jobs.items():
            if job is not None and job.state in ("RUNNING", "COMPLETING", "SUSPENDED"):
                for node in job.nodes:
                    on_node.setdefault(node, []).append(key)
        return tuple(ClusterNode(name=node.node, state=node.state, gpus_used=node.gpus_used,
                                 gpus_total=node.gpus_total,
                                 jobs=tuple(sorted(on_node.get(node.node, ()))))
                     for node in self._nodes)

    async def _lookup(self, ended: list[tuple[str, str]],
                      dirs: dict[str, str]) -> tuple[dict[str, SlurmJob], dict[str, str]] | None:
        """How attempts without an exit record ended: sacct, `sacct -c`, or scontrol; plus
        their log tails. Only runs when such an attempt exists (a second round trip).
        None when the lookup itself failed (cut off, host unreachable)."""
        self.lookups += 1
        boundary = new_boundary()
        stdin = "".join(f"{key}\t{dirs[key]}\n" for key, _name in ended).encode()
        try:
            result = await self.runner.run(script("slurm_finished.sh"),
                                           [boundary, *(name for _key, name in ended)],
                                           stdin=stdin, timeout=PROBE_TIMEOUT_S)
        except HostError:
            return None
        sections = split_sections(result.stdout.decode("utf-8", errors="replace"), boundary)
        if not sections.ended:
            return None
        names = frozenset(name for _key, name in ended)
        found = parse_scontrol_jobs(sections.text("scontrol"), names)
        found.update(parse_sacct(sections.text("sacct"), names))
        return found, hex_lines(sections.lines.get("tails", []), "T")

    # ---- launch, kill, tail ----------------------------------------------------------------

    async def launch(self, request: LaunchRequest) -> None:
        env = {k: v for k, v in request.env.items() if k not in _SLURM_OWNED_ENV}
        files_request = replace(request, env=env)
        stdin = launch_stdin(files_request)
        args = [request.session, request.attempt_dir,
                *sbatch_options(self.spec, len(request.gpus))]
        result = await self.runner.run(script("slurm_submit.sh"), args, stdin=stdin, timeout=60)
        if result.returncode != 0:
            message = result.stderr.decode(errors="replace").strip()
            raise HostError(f"{self.name}: {message or f'sbatch exited {result.returncode}'}")

    async def kill(self, session: str, attempt_dir: str, launcher: LauncherName,
                   reason: str = "", stop: Stop = PERSON_STOP) -> Stopped:
        # Slurm records how its job ended itself (the wrapper's record has the stop's fields)
        result = await self.runner.run(script("slurm_cancel.sh"),
                                       [session, attempt_dir, *stop.args()],
                                       timeout=stop.grace_s + 40)
        if result.returncode != 0:
            raise HostError(f"{self.name}: scancel failed: "
                            f"{result.stderr.decode(errors='replace')[:300]}")
        return Stopped()  # its records come with the next probe: the engine's clock here

    async def tail(self, attempt_dir: str, lines: int) -> list[str]:
        return await self._files.tail(attempt_dir, lines)

    # ---- preflight ---------------------------------------------------------------------------

    async def preflight(self, request: PreflightRequest) -> list[PreflightFinding]:
        check = ("for c in sbatch squeue scancel sacct scontrol; do "
                 "command -v \"$c\" >/dev/null || { echo \"$c is not installed\"; exit 1; }; done; "
                 "sinfo -h -o '%P %a %D' ${1:+-p \"$1\"} 2>&1")
        try:
            result = await self.runner.run(check, [self.spec.partition or ""], timeout=60)
        except HostError as exc:
            return [PreflightFinding(self.name, "connection", False, str(exc))]
        out = result.stdout.decode(errors="replace").strip()
        if result.returncode != 0 or not out:
            return [PreflightFinding(self.name, "connection", False,
                                     out or result.stderr.decode(errors="replace")[:300]
                                     or "sinfo listed no partition")]
        return [PreflightFinding(self.name, "connection", True, "slurm"),
                PreflightFinding(self.name, "slurm", True, out.splitlines()[0][:200])]

    async def close(self) -> None:
        await self.runner.close()


def make_slurm_host(spec: HostSpec, local_log_dir: str, *,
                    ssh_config: str | None = None) -> SlurmHost:
    """A local Slurm client writes attempt logs under the run dir (a shared filesystem on a
    real cluster); through a login node they go under $HOME/.eq-tui like any ssh host."""
    assert spec.slurm is not None
    runner: CommandRunner
    if spec.slurm.ssh is None:
        from eq_tui.hosts.local import LocalRunner

        runner = LocalRunner()
        log_dir: str | None = spec.log_dir or local_log_dir
    else:
        from eq_tui.hosts.ssh import SshRunner

        runner = SshRunner(spec.name, spec.slurm.ssh, config_path=ssh_config)
        log_dir = spec.log_dir
    slots = spec.gpus if spec.gpus is not None else range(spec.max_parallel)
    return SlurmHost(spec.name, runner, spec.slurm, slots=slots, log_dir=log_dir)
