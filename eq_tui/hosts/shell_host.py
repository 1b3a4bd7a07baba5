"""A Host that runs the package's POSIX sh snippets through any CommandRunner (local or ssh).

Everything variable reaches the scripts as positional arguments or on stdin, never inside the
script text; the remote side needs only sh, screen or tmux, and nvidia-smi.
"""

from __future__ import annotations

import re
import secrets
import shlex
import time
from collections.abc import Awaitable, Callable
from functools import cache
from importlib import resources

from eq_tui.errors import HostError
from eq_tui.hosts.base import (
    AttemptProbe,
    GpuProcess,
    GpuReading,
    HostSnapshot,
    LauncherName,
    LaunchRequest,
    PreflightFinding,
    PreflightRequest,
    ProbeRequest,
)
from eq_tui.hosts.gpu_csv import parse_apps, parse_gpus
from eq_tui.hosts.logclean import clean_line, clean_text
from eq_tui.hosts.runner import CommandRunner, StreamingRunner
from eq_tui.hosts.watch import WatchEnd, WatchEvent, WatchRequest, run_watch

GpuReader = Callable[[], Awaitable[tuple[list[GpuReading], list[GpuProcess], list[str]]]]
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FIELD_UNSAFE = re.compile(r"[\t\n\r]")
PROBE_TIMEOUT_S = 30.0
_INCLUDE = re.compile(r"^# eq-tui include: ([A-Za-z0-9_.]+)$", re.MULTILINE)


@cache
def script(name: str) -> str:
    """A host script's text, each `# eq-tui include: NAME` line replaced by that script (pieces
    two scripts share: the remote side gets one self-contained text per command)."""
    text = (resources.files("eq_tui.hosts") / "scripts" / name).read_text(encoding="utf-8")
    return _INCLUDE.sub(lambda match: script(match.group(1)), text)


def launch_stdin(request: LaunchRequest) -> bytes:
    """The request as launch.sh and slurm_submit.sh read it (_launch_request.sh): the number
    of env lines, `export NAME='value'` lines, the command text, the end marker."""
    env = dict(request.env)
    env["EQ_CWD"] = request.cwd or ""
    env["EQ_CONDA"] = request.conda or ""
    env["EQ_CONDA_HOOK"] = request.conda_hook or ""
    exports = []
    for name, value in env.items():
        if not _ENV_NAME.fullmatch(name):
            raise HostError(f"environment variable name {name!r} is not valid")
        exports.append(f"export {name}={shlex.quote(value)}\n")
    text = "".join(exports)
    return f"{text.count(chr(10))}\n{text}{request.cmd}\nEQ_LAUNCH_END\n".encode()


def _field(value: str, what: str) -> str:
    if _FIELD_UNSAFE.search(value):
        raise HostError(f"{what} {value!r} contains a tab or newline")
    return value


def _hex_text(value: str) -> str:
    try:
        return bytes.fromhex(value).decode("utf-8", errors="replace")
    except ValueError:
        return ""


def _float(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


class ShellHost:
    def __init__(self, name: str, runner: CommandRunner, *, log_dir: str | None = None,
                 session_prefix: str = "eq_", query_gpus: bool = True,
                 gpu_reader: GpuReader | None = None) -> None:
        self.name = name
        self.runner = runner
        self.log_dir = log_dir
        self.session_prefix = session_prefix
        self.query_gpus = query_gpus and gpu_reader is None
        self.gpu_reader = gpu_reader
        self._home: str | None = None
        self.probes_sent = 0

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
            return _field(f"{base.rstrip('/')}/{project}-{token}", "log dir")
        return f"{await self.home()}/.eq-tui/{project}-{token}/logs"

    # ---- probe -------------------------------------------------------------------------------

    def _probe_stdin(self, request: ProbeRequest) -> bytes:
        lines = []
        for ref in request.attempts:
            lines.append("\t".join(("A", _field(ref.key, "key"), _field(ref.session, "session"),
                                    _field(ref.attempt_dir, "attempt dir"),
                                    _field(ref.output_check or "-", "output_check"))))
        for kind, checks in (("O", request.output_checks), ("P", request.preconditions)):
            for check in checks:
                lines.append("\t".join((kind, _field(check.key, "key"),
                                        _field(check.pattern, "path"))))
        return ("\n".join(lines) + "\n").encode() if lines else b""

    async def probe(self, request: ProbeRequest) -> HostSnapshot:
        boundary = f"@@eq-{secrets.token_hex(8)}"
        args = [request.cwd or "-", self.session_prefix, "1" if self.query_gpus else "0",
                boundary]
        started = time.monotonic()
        taken_at = time.time()
        try:
            stdin = self._probe_stdin(request)
            self.probes_sent += 1
            code, out, err = await self._run("probe.sh", args, stdin=stdin,
                                             timeout=PROBE_TIMEOUT_S)
        except HostError as exc:
            return HostSnapshot(host=self.name, ok=False, taken_at=taken_at, error=str(exc))
        rtt = time.monotonic() - started
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
                warnings=tuple(snapshot.warnings) + tuple(warnings))
        return snapshot

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
        args = [request.launcher, _field(request.session, "session"),
                _field(request.attempt_dir, "attempt dir")]
        code, _out, err = await self._run("launch.sh", args, stdin=stdin, timeout=40)
        if code != 0:
            message = err.decode(errors="replace").strip() or f"launch.sh exited {code}"
            raise HostError(f"{self.name}: {message}")

    async def kill(self, session: str, attempt_dir: str, launcher: LauncherName) -> None:
        code, _out, err = await self._run("kill.sh", [launcher, session, attempt_dir],
                                          timeout=30)
        if code != 0:
            raise HostError(f"{self.name}: kill failed: {err.decode(errors='replace')[:300]}")

    async def tail(self, attempt_dir: str, lines: int) -> list[str]:
        _code, out, _err = await self._run("tail.sh", [attempt_dir, str(max(1, lines))],
                                           timeout=15)
        return clean_text(out)

    # ---- preflight ---------------------------------------------------------------------------

    async def preflight(self, request: PreflightRequest) -> list[PreflightFinding]:
        args = [request.cwd or "-", request.launcher, "1" if self.query_gpus else "0",
                request.conda or "-", request.conda_hook or "-"]
        try:
            stdin = "".join(f"P\t{_field(check.key, 'key')}\t{_field(check.pattern, 'path')}\n"
                            for check in request.preconditions).encode()
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
        await self.runner.close()


def parse_probe(host: str, text: str, boundary: str, request: ProbeRequest, *,
                taken_at: float, rtt_s: float | None) -> HostSnapshot:
    """Turn probe.sh output into a snapshot; anything cut off or garbled gives ok=False."""
    sections: dict[str, list[str]] = {}
    codes: dict[str, int | None] = {}
    current: list[str] | None = None
    ended = False
    for line in text.split("\n"):
        if line.startswith(boundary + " "):
            name = line[len(boundary) + 1:].strip()
            if name.endswith("_rc") or " " in name:
                key, _, value = name.partition(" ")
                codes[key] = _int(value)
                current = None
                continue
            if name == "end":
                ended = True
                break
            current = sections.setdefault(name, [])
            continue
        if current is not None:
            current.append(line)
    if not ended:
        return HostSnapshot(host=host, ok=False, taken_at=taken_at,
                            error="probe output was cut off")
    warnings: list[str] = []
    sessions = set()
    for line in sections.get("sessions", []):
        kind, _, ident = line.partition(" ")
        if kind == "screen" and "." in ident:
            sessions.add(ident.split(".", 1)[1])
        elif kind == "tmux" and ident:
            sessions.add(ident)
    gpus: list[GpuReading] = []
    processes: list[GpuProcess] = []
    if "gpus" in sections:
        gpu_text = "\n".join(sections["gpus"])
        if codes.get("gpus_rc") not in (0, None):
            first = next((ln for ln in sections["gpus"] if ln.strip()), "no output")
            warnings.append(f"nvidia-smi failed (exit {codes.get('gpus_rc')}): {first[:200]}")
        else:
            gpus, gpu_warnings = parse_gpus(gpu_text)
            warnings += gpu_warnings
            if not gpus and not gpu_warnings:
                warnings.append("nvidia-smi listed no GPUs")
            if codes.get("apps_rc") == 0:
                processes, app_warnings = parse_apps("\n".join(sections.get("apps", [])))
                warnings += app_warnings
    refs = {ref.key: ref for ref in request.attempts}
    facts: dict[str, list[str]] = {}
    tails: dict[str, str] = {}
    last_lines: dict[str, str] = {}
    output_checks: dict[str, bool] = {}
    preconditions: dict[str, bool] = {}
    for line in sections.get("requests", []):
        parts = line.split("\t")
        if parts[0] == "A" and len(parts) == 9:
            facts[parts[1]] = parts
        elif parts[0] == "T" and len(parts) == 3:
            tails[parts[1]] = _hex_text(parts[2])
        elif parts[0] == "L" and len(parts) == 3:
            last_lines[parts[1]] = clean_line(_hex_text(parts[2]))
        elif parts[0] == "O" and len(parts) == 3:
            output_checks[parts[1]] = parts[2] == "1"
        elif parts[0] == "P" and len(parts) == 3:
            preconditions[parts[1]] = parts[2] == "1"
    attempts: dict[str, AttemptProbe] = {}
    for key, ref in refs.items():
        fact = facts.get(key)
        if fact is None:
            return HostSnapshot(host=host, ok=False, taken_at=taken_at,
                                error=f"probe returned nothing for {key}")
        _, _, pid, alive, start, code, exited_at, size, out = fact
        exit_code = _int(code) if code != "-" else None
        attempts[key] = AttemptProbe(
            key=key, session_alive=ref.session in sessions,
            pid=_int(pid) if pid != "-" else None, pid_alive=alive == "1",
            started=_float(start) if start != "-" else None, exit_code=exit_code,
            exited_at=_float(exited_at) if exited_at != "-" else None,
            log_size=_int(size) or 0,
            output_ok=None if out == "-" else out == "1",
            log_tail=tails.get(key, ""), last_line=last_lines.get(key, ""))
    return HostSnapshot(host=host, ok=True, taken_at=taken_at, rtt_s=rtt_s, gpus=tuple(gpus),
                        processes=tuple(processes), sessions=frozenset(sessions),
                        attempts=attempts, output_checks=output_checks,
                        preconditions=preconditions, warnings=tuple(warnings))
