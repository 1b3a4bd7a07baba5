"""A host that lives in memory: for fast unit tests of the engine's ledger and commands.

It is no stand-in for the real hosts (their tests run real screen/tmux/sshd): it only keeps
what a launch started and answers probes from that, so a test can drive a job through its
life (start, exit with a code, vanish) in microseconds and assert on what the engine did.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eq_tui.hosts.base import (
    PERSON_STOP,
    AttemptProbe,
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


@dataclass
class Session:
    request: LaunchRequest
    started: float
    exit_code: int | None = None
    log: list[str] = field(default_factory=list)
    alive: bool = True


class MemoryHost:
    def __init__(self, name: str, gpus: int = 2, *, clock: object = None) -> None:
        self.name = name
        self.gpus = gpus
        self.used_mib = dict.fromkeys(range(gpus), 0)
        self.sessions: dict[str, Session] = {}  # by attempt dir
        self.launches: list[LaunchRequest] = []
        self.kills: list[str] = []
        self.now = 1000.0

    # ---- what a test does to it --------------------------------------------------------------

    def finish(self, job_id: str, exit_code: int = 0, *, log: str = "") -> None:
        """The job's current session exits with this code (and leaves the session)."""
        session = self.current(job_id)
        session.exit_code = exit_code
        session.alive = False
        if log:
            session.log.append(log)
        for gpu in session.request.gpus:
            self.used_mib[gpu] = 0

    def vanish(self, job_id: str) -> None:
        """The session disappears with no exit record (a reboot)."""
        session = self.current(job_id)
        session.alive = False
        for gpu in session.request.gpus:
            self.used_mib[gpu] = 0

    def current(self, job_id: str) -> Session:
        return [s for s in self.sessions.values() if s.request.job_id == job_id][-1]

    # ---- the Host protocol -------------------------------------------------------------------

    async def log_root(self, project: str, token: str) -> str:
        return f"/mem/{self.name}/{project}/{token}"

    async def probe(self, request: ProbeRequest) -> HostSnapshot:
        attempts = {}
        for ref in request.attempts:
            session = self.sessions.get(ref.attempt_dir)
            if session is None:
                continue
            attempts[ref.key] = AttemptProbe(
                key=ref.key, session_alive=session.alive, pid=4242, pid_alive=session.alive,
                started=session.started, exit_code=session.exit_code,
                exited_at=self.now if session.exit_code is not None else None,
                log_size=sum(map(len, session.log)),
                output_ok=True if ref.output_check and session.exit_code is not None else None,
                log_tail="\n".join(session.log) if session.exit_code is not None else "",
                last_line=session.log[-1] if session.log else "")
        gpus = tuple(GpuReading(i, f"GPU-{self.name}-{i}", "Mem GPU", used, 24576, 0)
                     for i, used in self.used_mib.items())
        return HostSnapshot(host=self.name, ok=True, taken_at=self.now, rtt_s=0.001,
                            gpus=gpus, attempts=attempts,
                            sessions=frozenset(s.request.session
                                               for s in self.sessions.values() if s.alive),
                            output_checks={c.key: False for c in request.output_checks},
                            preconditions={c.key: True for c in request.preconditions})

    async def launch(self, request: LaunchRequest) -> None:
        self.launches.append(request)
        self.sessions[request.attempt_dir] = Session(request, started=self.now)
        for gpu in request.gpus:
            self.used_mib[gpu] = 4000

    async def kill(self, session: str, attempt_dir: str, launcher: LauncherName,
                   reason: str = "", stop: Stop = PERSON_STOP) -> Stopped:
        self.kills.append(session)
        found = self.sessions.get(attempt_dir)
        if found is not None:
            found.alive = False
            for gpu in found.request.gpus:
                self.used_mib[gpu] = 0
        return Stopped()  # an in-memory session has no exit record

    async def tail(self, attempt_dir: str, lines: int) -> list[str]:
        session = self.sessions.get(attempt_dir)
        return session.log[-lines:] if session else []

    async def preflight(self, request: PreflightRequest) -> list[PreflightFinding]:
        return [PreflightFinding(self.name, "connection", True, "in memory")]

    async def close(self) -> None:
        return None
