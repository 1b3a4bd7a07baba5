"""What eq-tui and its host scripts say to each other over stdin and stdout, for the shell
(screen/tmux) and Slurm hosts alike.

Requests go in on stdin as tab-separated lines, so every field is checked for tabs and
newlines first. Answers come back in sections, each opened by a `BOUNDARY NAME` line (a random
boundary per command, so no program's output can forge one); `BOUNDARY NAME_rc N` lines carry
exit codes and `BOUNDARY end` says the output is complete. Log text crosses as hex, so no byte
in a log can break a line apart.
"""

from __future__ import annotations

import re
import secrets
import shlex
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources

from eq_tui.errors import HostError
from eq_tui.hosts.base import (
    AttemptProbe,
    CommandCheck,
    GpuHealth,
    GpuProcess,
    GpuReading,
    HostSnapshot,
    LaunchRequest,
    PathCheck,
    ProbeRequest,
)
from eq_tui.hosts.claims import parse_claims
from eq_tui.hosts.gpu_csv import parse_apps, parse_gpus, parse_pmon
from eq_tui.hosts.lab_rules import HostLab, parse_lab
from eq_tui.hosts.logclean import clean_line

PROBE_TIMEOUT_S = 30.0
_INCLUDE = re.compile(r"^# eq-tui include: ([A-Za-z0-9_.]+)$", re.MULTILINE)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FIELD_UNSAFE = re.compile(r"[\t\n\r]")


@cache
def script(name: str) -> str:
    """A host script's text, each `# eq-tui include: NAME` line replaced by that script (pieces
    two scripts share: the remote side gets one self-contained text per command)."""
    text = (resources.files("eq_tui.hosts") / "scripts" / name).read_text(encoding="utf-8")
    return _INCLUDE.sub(lambda match: script(match.group(1)), text)


def new_boundary() -> str:
    return f"@@eq-{secrets.token_hex(8)}"


# ---- requests ------------------------------------------------------------------------------

def check_field(value: str, what: str) -> str:
    """`value`, if it can travel as one field of a tab-separated line; else a HostError."""
    if _FIELD_UNSAFE.search(value):
        raise HostError(f"{what} {value!r} contains a tab or newline")
    return value


def probe_stdin(request: ProbeRequest) -> bytes:
    """probe.sh's requests: `A` attempt lines, `O` output checks, `P` preconditions."""
    lines = []
    follow = dict(request.follow)
    for ref in request.attempts:
        fields = ["A", check_field(ref.key, "key"), check_field(ref.session, "session"),
                  check_field(ref.attempt_dir, "attempt dir"),
                  check_field(ref.output_check or "-", "output_check")]
        if ref.key in follow:
            fields.append(str(max(0, int(follow[ref.key]))))
        lines.append("\t".join(fields))
    for kind, checks in (("O", request.output_checks), ("P", request.preconditions)):
        lines += [_check_line(kind, check) for check in checks]
    return ("\n".join(lines) + "\n").encode() if lines else b""


def preflight_stdin(checks: tuple[PathCheck, ...],
                    commands: tuple[CommandCheck, ...] = ()) -> bytes:
    """preflight.sh's requests: one `P` line per precondition, `C` (and `S`) lines per command
    to check."""
    return ("".join(_check_line("P", check) + "\n" for check in checks)
            + "".join(_command_lines(command) for command in commands)).encode()


def _command_lines(check: CommandCheck) -> str:
    """One command check: its first word, and the script it runs if any (a word with a tab or
    newline is not sent: the shell would not run it either)."""
    if _FIELD_UNSAFE.search(check.word + (check.script or "")):
        return ""
    text = f"C\t{check.key}\t{check.word}\n"
    if check.script:
        text += f"S\t{check.key}\t{check.script}\n"
    return text


def _check_line(kind: str, check: PathCheck) -> str:
    return "\t".join((kind, check_field(check.key, "key"), check_field(check.pattern, "path")))


def launch_stdin(request: LaunchRequest) -> bytes:
    """The request as launch.sh and slurm_submit.sh read it (_launch_request.sh): launch.sh's
    drain wait when there is one (`D GPUS BELOW_MIB ROUNDS EVERY_S`), the number of env lines,
    `export NAME='value'` lines, the command text, the end marker."""
    env = dict(request.env)
    env["EQ_CWD"] = request.cwd or ""
    env["EQ_CONDA"] = request.conda or ""
    env["EQ_CONDA_HOOK"] = request.conda_hook or ""
    env["EQ_VENV"] = request.venv or ""
    exports = []
    for name, value in env.items():
        if not _ENV_NAME.fullmatch(name):
            raise HostError(f"environment variable name {name!r} is not valid")
        exports.append(f"export {name}={shlex.quote(value)}\n")
    text = "".join(exports)
    drain = request.drain
    head = "" if drain is None else (f"D {','.join(map(str, drain.gpus))} {int(drain.below_mib)} "
                                     f"{int(drain.rounds)} {drain.every_s:g}\n")
    return f"{head}{text.count(chr(10))}\n{text}{request.cmd}\nEQ_LAUNCH_END\n".encode()


# ---- answers -------------------------------------------------------------------------------

@dataclass
class Sections:
    """A script's output split at its boundary lines."""

    lines: dict[str, list[str]] = field(default_factory=dict)
    codes: dict[str, int | None] = field(default_factory=dict)  # `NAME_rc N` lines
    ended: bool = False  # the `end` line came: nothing was cut off

    def text(self, name: str) -> str:
        return "\n".join(self.lines.get(name, []))


def split_sections(text: str, boundary: str) -> Sections:
    sections = Sections()
    current: list[str] | None = None
    for line in text.split("\n"):
        if line.startswith(boundary + " "):
            name = line[len(boundary) + 1:].strip()
            if name.endswith("_rc") or " " in name:
                key, _, value = name.partition(" ")
                sections.codes[key] = _int(value)
                current = None
            elif name == "end":
                sections.ended = True
                break
            else:
                current = sections.lines.setdefault(name, [])
        elif current is not None:
            current.append(line)
    return sections


def hex_text(value: str) -> str:
    """Log bytes sent as hex, as text; "" for anything that is not hex."""
    try:
        return bytes.fromhex(value).decode("utf-8", errors="replace")
    except ValueError:
        return ""


def hex_lines(lines: list[str], kind: str) -> dict[str, str]:
    """`KIND<TAB>key<TAB>hex` lines (log tails `T`, last lines `L`, epoch lines `E`) as
    key → text."""
    found = {}
    for line in lines:
        parts = line.split("\t")
        if len(parts) == 3 and parts[0] == kind:
            found[parts[1]] = hex_text(parts[2])
    return found


def _followed(lines: list[str]) -> dict[str, tuple[int | None, bytes]]:
    """`F<TAB>key<TAB>offset<TAB>hex` lines: each followed log's bytes from that offset."""
    found: dict[str, tuple[int | None, bytes]] = {}
    for line in lines:
        parts = line.split("\t")
        if len(parts) == 4 and parts[0] == "F":
            try:
                found[parts[1]] = (int(parts[2]), bytes.fromhex(parts[3]))
            except ValueError:
                continue
    return found


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


def parse_probe(host: str, text: str, boundary: str, request: ProbeRequest, *,
                taken_at: float, rtt_s: float | None) -> HostSnapshot:
    """Turn probe.sh output into a snapshot; anything cut off or garbled gives ok=False."""
    sections = split_sections(text, boundary)
    if not sections.ended:
        return HostSnapshot(host=host, ok=False, taken_at=taken_at,
                            error="probe output was cut off")
    sessions = _sessions(sections.lines.get("sessions", []))
    lab = lab_of(sections)
    gpus, processes, warnings = _gpus(sections)
    requests = sections.lines.get("requests", [])
    facts: dict[str, list[str]] = {}
    checks: dict[str, dict[str, bool]] = {"O": {}, "P": {}}
    for line in requests:
        parts = line.split("\t")
        if parts[0] == "A" and len(parts) in (9, 10):
            facts[parts[1]] = parts
        elif parts[0] in checks and len(parts) == 3:
            checks[parts[0]][parts[1]] = parts[2] == "1"
    tails = hex_lines(requests, "T")
    followed = _followed(requests)
    last_lines = {key: clean_line(text) for key, text in hex_lines(requests, "L").items()}
    epoch_lines = {key: clean_line(text) for key, text in hex_lines(requests, "E").items()}
    attempts: dict[str, AttemptProbe] = {}
    for ref in request.attempts:
        fact = facts.get(ref.key)
        if fact is None:
            return HostSnapshot(host=host, ok=False, taken_at=taken_at,
                                error=f"probe returned nothing for {ref.key}")
        _, _, pid, alive, start, code, exited_at, size, out = fact[:9]
        pgid = fact[9] if len(fact) == 10 else "-"
        attempts[ref.key] = AttemptProbe(
            key=ref.key, session_alive=ref.session in sessions,
            pid=_int(pid) if pid != "-" else None, pid_alive=alive == "1",
            started=_float(start) if start != "-" else None,
            exit_code=_int(code) if code != "-" else None,
            exited_at=_float(exited_at) if exited_at != "-" else None,
            log_size=_int(size) or 0,
            output_ok=None if out == "-" else out == "1",
            log_tail=tails.get(ref.key, ""), last_line=last_lines.get(ref.key, ""),
            epoch_line=epoch_lines.get(ref.key, ""),
            pgid=_int(pgid) if pgid != "-" else None,
            followed=followed.get(ref.key, (None, b""))[1],
            followed_from=followed.get(ref.key, (None, b""))[0])
    return HostSnapshot(host=host, ok=True, taken_at=taken_at, rtt_s=rtt_s, gpus=tuple(gpus),
                        processes=tuple(processes), sessions=frozenset(sessions),
                        attempts=attempts, output_checks=checks["O"],
                        preconditions=checks["P"],
                        warnings=tuple(warnings) + ((lab.warning,) if lab.warning else ()),
                        health=tuple(parse_health(sections)),
                        cores=sections.codes.get("cores") or None,
                        claims=parse_claims(sections.lines.get("claims", [])), lab=lab)


def lab_of(sections: Sections) -> HostLab:
    """The lab's rules as the probe read them (lab_rules.py), who we are there, and the other
    users whose engines wait there."""
    return parse_lab(sections.lines.get("rules"), path=sections.text("rules_path").strip(),
                     user=sections.text("user").strip(),
                     clock=sections.text("clock").strip() or None,
                     waiting=(line.split()[0] for line in sections.lines.get("wants", [])
                              if line.strip()),
                     checksum=sections.text("rules_sum"))


def _sessions(lines: list[str]) -> set[str]:
    sessions = set()
    for line in lines:
        kind, _, ident = line.partition(" ")
        if kind == "screen" and "." in ident:
            sessions.add(ident.split(".", 1)[1])
        elif kind == "tmux" and ident:
            sessions.add(ident)
    return sessions


def _gpus(sections: Sections) -> tuple[list[GpuReading], list[GpuProcess], list[str]]:
    warnings: list[str] = []
    gpus: list[GpuReading] = []
    processes: list[GpuProcess] = []
    if "gpus" not in sections.lines:
        return gpus, processes, warnings
    code = sections.codes.get("gpus_rc")
    if code not in (0, None):
        first = next((ln for ln in sections.lines["gpus"] if ln.strip()), "no output")
        warnings.append(f"nvidia-smi failed (exit {code}): {first[:200]}")
        return gpus, processes, warnings
    gpus, gpu_warnings = parse_gpus(sections.text("gpus"))
    warnings += gpu_warnings
    if not gpus and not gpu_warnings:
        warnings.append("nvidia-smi listed no GPUs")
    if sections.codes.get("apps_rc") == 0:
        processes, app_warnings = parse_apps(sections.text("apps"))
        warnings += app_warnings
        processes = with_owners(processes, sections.lines.get("owners"))
        if sections.codes.get("pmon_rc") == 0:
            processes = with_utilisation(processes, gpus, parse_pmon(sections.text("pmon")))
    return gpus, processes, warnings


def with_utilisation(processes: list[GpuProcess], gpus: list[GpuReading],
                     utils: dict[tuple[int, int], int]) -> list[GpuProcess]:
    """Each process with its own utilisation on its GPU (absent from the sample: 0)."""
    index = {gpu.uuid: gpu.index for gpu in gpus}
    return [replace(p, util_pct=utils.get((index.get(p.gpu_uuid, -1), p.pid), 0))
            for p in processes]


def with_owners(processes: list[GpuProcess], lines: list[str] | None) -> list[GpuProcess]:
    """The processes with their process group, session, user and command from the `owners`
    section (`ps` lines: pid pgid sid user args; an attempt's own process: pid pgid sid, from
    /proc). None: no such section (`ps` did not run); a process not listed was gone."""
    if lines is None:
        return processes
    owners: dict[int, GpuProcess] = {}
    for line in lines:
        parts = line.split(None, 4)
        if len(parts) >= 3 and all(part.isdigit() for part in parts[:3]):
            pid = int(parts[0])  # an attempt's own process comes with no user or command
            owners[pid] = GpuProcess(pid, "", None, parts[3] if len(parts) > 3 else "",
                                     parts[4].strip() if len(parts) == 5 else "",
                                     pgid=int(parts[1]), sid=int(parts[2]))
    return [replace(owners[p.pid], gpu_uuid=p.gpu_uuid, used_mib=p.used_mib, running=True)
            if p.pid in owners else replace(p, running=False) for p in processes]


def parse_health(sections: Sections) -> list[GpuHealth]:
    """The `health` section: index, uuid, uncorrected ECC errors, retired pages pending."""
    if "health" not in sections.lines or sections.codes.get("health_rc") != 0:
        return []
    found = []
    for line in sections.lines["health"]:
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4 or not fields[0].isdigit():
            continue
        pending = {"yes": True, "no": False}.get(fields[3].lower())
        found.append(GpuHealth(index=int(fields[0]), uuid=fields[1],
                               ecc_uncorrected=_int(fields[2]), pages_pending=pending))
    return found
