"""A Host that runs the package's POSIX sh snippets through any CommandRunner (local or ssh).

Everything variable reaches the scripts as positional arguments or on stdin, never inside the
script text (the format is shell_protocol.py's); the remote side needs only sh, screen or
tmux, and nvidia-smi.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable

from eq_tui.errors import HostError
from eq_tui.hosts.base import (
    PERSON_STOP,
    GpuProcess,
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
from eq_tui.hosts.claims import REFUSED_EXIT, ClaimRefused, launch_args, refusal
from eq_tui.hosts.leftovers import Reaped, ReapRequest, parse_reaped, reap_args
from eq_tui.hosts.logclean import clean_line, clean_text
from eq_tui.hosts.runner import CommandRunner, StreamingRunner
from eq_tui.hosts.shell_protocol import (
    PROBE_TIMEOUT_S,
    check_field,
    launch_stdin,
    new_boundary,
    parse_probe,
    preflight_stdin,
    probe_stdin,
    script,
)
from eq_tui.hosts.watch import WatchEnd, WatchEvent, WatchRequest, run_watch

GpuReader = Callable[[], Awaitable[tuple[list[GpuReading], list[GpuProcess], list[str]]]]

WANT_OFF_TIMEOUT_S = 3.0  # an ending engine waits no longer to take its want back


class ShellHost:
    def __init__(self, name: str, runner: CommandRunner, *, log_dir: str | None = None,
                 session_prefix: str = "eq_", query_gpus: bool = True,
                 gpu_reader: GpuReader | None = None, claims_dir: str | None = None,
                 rules: str | None = None) -> None:
        self.name = name
        self.claims_dir = claims_dir  # None: the host's default (claims.py)
        self.rules = rules  # the lab's rules file there; None: the host's default (lab_rules.py)
        self.runner = runner
        self.log_dir = log_dir
        self.session_prefix = session_prefix
        self.query_gpus = query_gpus and gpu_reader is None
        self.gpu_reader = gpu_reader
        self._home: str | None = None
        # probe.sh's WANT that takes back the want file our probes wrote here (None: none)
        self._wanting: str | None = None

    async def _run(self, name: str, args: list[str], *, stdin: bytes = b"",
                   timeout: float | None = 30.0) -> tuple[int, bytes, bytes]:
        result = await self.runner.run(script(name), args, stdin=stdin, timeout=timeout)
        return result.returncode, result.stdout, result.stderr

    async def home(self) -> str:
        if self._home is None:
            result = await self.runner.run('printf %s "$HOME"', timeout=15)
            home = result.stdout.decode(errors="replace").strip()
            if result.returncode != 0 or not home.startswith("/"):
                raise HostError(f"{self.name}: cannot read $HOME")
            self._home = home
        return self._home

    async def log_root(self, project: str, token: str) -> str:
        if self.log_dir:
            base = self.log_dir
            if base == "~" or base.startswith("~/"):
                base = await self.home() + base[1:]
            return check_field(f"{base.rstrip('/')}/{project}-{token}", "log dir")
        return f"{await self.home()}/.eq-tui/{project}-{token}/logs"

    # ---- probe -------------------------------------------------------------------------------

    async def probe(self, request: ProbeRequest) -> HostSnapshot:
        boundary = new_boundary()
        query = ("2" if request.health else "1") if self.query_gpus else "0"
        args = [request.cwd or "-", self.session_prefix, query, boundary,
                "1" if request.cores else "0", self.claims_dir or "-", request.want or "-",
                self.rules or "-"]
        started = time.monotonic()
        taken_at = time.time()
        try:
            stdin = probe_stdin(request)
            code, out, err = await self._run("probe.sh", args, stdin=stdin,
                                             timeout=PROBE_TIMEOUT_S)
        except HostError as exc:
            return HostSnapshot(host=self.name, ok=False, taken_at=taken_at, error=str(exc))
        rtt = time.monotonic() - started
        self._note_want(request.want, sent_ok=code == 0)
        snapshot = parse_probe(self.name, out.decode("utf-8", errors="replace"), boundary,
                               request, taken_at=taken_at, rtt_s=rtt)
        if not snapshot.ok and code != 0:
            detail = err.decode(errors="replace").strip()[:300]
            snapshot = HostSnapshot(host=self.name, ok=False, taken_at=taken_at,
                                    error=f"probe exited {code}: {detail}")
        if snapshot.ok and self.gpu_reader is not None:
            gpus, processes, warnings = await self.gpu_reader()
            snapshot = HostSnapshot(
                host=snapshot.host, ok=True, taken_at=taken_at, rtt_s=rtt, gpus=tuple(gpus),
                processes=tuple(processes), sessions=snapshot.sessions,
                attempts=snapshot.attempts, output_checks=snapshot.output_checks,
                preconditions=snapshot.preconditions,
                warnings=tuple(snapshot.warnings) + tuple(warnings), claims=snapshot.claims,
                lab=snapshot.lab)
        return snapshot

    def _note_want(self, want: str | None, *, sent_ok: bool) -> None:
        """What close() says to take our want back: claims.want_arg's, its flag 0."""
        fields = (want or "").split(":")
        if len(fields) < 3:
            return
        if fields[2] == "1":
            fields[2] = "0"
            self._wanting = ":".join(fields)
        elif sent_ok:
            self._wanting = None

    # ---- watcher -----------------------------------------------------------------------------

    @property
    def watches_gpus(self) -> bool:
        return self.query_gpus

    async def watch(self, request: WatchRequest,
                    on_event: Callable[[WatchEvent], None]) -> WatchEnd:
        if not isinstance(self.runner, StreamingRunner):
            raise HostError(f"{self.name}: this connection cannot stream a watcher")
        return await run_watch(self.runner, script("watch.sh"), request,
                               query_gpus=self.query_gpus, on_event=on_event)

    # ---- launch, kill, tail ----------------------------------------------------------------

    async def launch(self, request: LaunchRequest) -> None:
        stdin = launch_stdin(request)
        args = [request.launcher, check_field(request.session, "session"),
                check_field(request.attempt_dir, "attempt dir"),
                *launch_args(request.claim, self.claims_dir, request.job_id, request.attempt,
                             request.gpus, self.rules)]
        code, _out, err = await self._run("launch.sh", args, stdin=stdin, timeout=40)
        why = refusal(err.decode(errors="replace")) if code == REFUSED_EXIT else None
        if why is not None:
            raise ClaimRefused(f"{self.name}: {why}")
        if code != 0:
            message = err.decode(errors="replace").strip() or f"launch.sh exited {code}"
            raise HostError(f"{self.name}: {message}")

    async def kill(self, session: str, attempt_dir: str, launcher: LauncherName,
                   reason: str = "", stop: Stop = PERSON_STOP) -> Stopped:
        code, out, err = await self._run("kill.sh", [launcher, session, attempt_dir,
                                                     clean_line(reason), *stop.args()],
                                         timeout=stop.grace_s + 30)
        if code != 0:
            raise HostError(f"{self.name}: kill failed: {err.decode(errors='replace')[:300]}")
        return stopped_by_record(out.decode(errors="replace"))

    async def reap(self, request: ReapRequest) -> list[Reaped]:
        """End the processes still holding an ended attempt's GPUs that are that attempt's."""
        code, out, err = await self._run("reap.sh", reap_args(request),
                                         timeout=request.grace_s + 30)
        if code != 0:
            raise HostError(f"{self.name}: leftover cleanup failed: "
                            f"{err.decode(errors='replace')[:300]}")
        return parse_reaped(out.decode(errors="replace"))

    async def tail(self, attempt_dir: str, lines: int) -> list[str]:
        _code, out, _err = await self._run("tail.sh", [attempt_dir, str(max(1, lines))],
                                           timeout=15)
        return clean_text(out)

    # ---- preflight ---------------------------------------------------------------------------

    async def preflight(self, request: PreflightRequest) -> list[PreflightFinding]:
        args = [request.cwd or "-", request.launcher, "1" if self.query_gpus else "0",
                request.conda or "-", request.conda_hook or "-", request.venv or "-",
                request.path or "-"]
        try:
            stdin = preflight_stdin(request.preconditions, request.commands)
            code, out, err = await self._run("preflight.sh", args, stdin=stdin, timeout=60)
        except HostError as exc:
            return [PreflightFinding(self.name, "connection", False, str(exc))]
        findings = []
        for line in out.decode(errors="replace").splitlines():
            parts = line.split("\t", 2)
            if len(parts) != 3:
                continue
            check, state, detail = parts
            job = None
            if check == "precondition":
                job, _, pattern = detail.partition("\t")
                detail = f"{pattern} exists" if state == "ok" else f"nothing matches {pattern}"
            elif check in ("command", "script", "suggest"):
                job, _, word = detail.partition("\t")
                detail = word
            findings.append(PreflightFinding(self.name, check, state == "ok", clean_line(detail),
                                             job=job))
        if not findings:
            findings.append(PreflightFinding(self.name, "connection", False,
                                             f"preflight exited {code}: "
                                             f"{err.decode(errors='replace')[:200]}"))
        if self.gpu_reader is not None:
            gpus, _processes, warnings = await self.gpu_reader()
            findings.append(PreflightFinding(self.name, "nvml", bool(gpus),
                                             f"{len(gpus)} GPU(s)" + "; ".join(warnings)))
        return findings

    async def close(self) -> None:
        if self._wanting is not None and self._reachable():
            # an engine that ends while its jobs wait takes its want back; unsaid (a host
            # down, an answer lost), the want goes stale in 3 of its polls + 10 s
            with contextlib.suppress(HostError, OSError, TimeoutError):
                async with asyncio.timeout(WANT_OFF_TIMEOUT_S):
                    await self._run("want_off.sh", [self.claims_dir or "-", self._wanting],
                                    timeout=WANT_OFF_TIMEOUT_S)
        await self.runner.close()

    def _reachable(self) -> bool:
        link = getattr(self.runner, "link", None)  # an SSH runner's; local ones have none
        return link is None or link.state == "up"


def stopped_by_record(out: str) -> Stopped:
    """kill.sh's `exit CODE`, `started TIME` and `ended TIME` lines: how the attempt ended,
    and its two ends by the host's clock, as its own records say."""
    code: int | None = None
    times: dict[str, float] = {}
    for line in out.splitlines():
        word, _, value = line.partition(" ")
        value = value.strip()
        if word == "exit" and value.isdigit():
            code = int(value)
        elif word in ("started", "ended"):
            try:
                at = float(value)
            except ValueError:
                continue
            if math.isfinite(at):
                times[word] = at
    return Stopped(code, times.get("ended"), times.get("started"))
