"""Claims on a host's GPUs, shared by every eq-tui engine (of any user) that launches there.

A launch takes a claim on each of its GPUs under the host's lock, after checking that they are
still free for it (hosts/scripts/_claim_launch.sh); the attempt's wrapper holds the claims until
it ends, and a claim whose process is gone is void (hosts/scripts/_claims.sh). The probe lists
the live claims, so placement counts another engine's job as holding its GPUs from the moment
it launched, not only once its memory shows. Claims ride in the launch and the probe: they cost
no round trip of their own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from eq_tui.errors import HostError
from eq_tui.hosts.base import GpuProcess, GpuReading
from eq_tui.hosts.claim_types import ClaimTicket, GpuClaim

REFUSED_EXIT = 10  # launch.sh: the claims say the GPUs are not free for this attempt
CLAIMS_DIR = "/tmp/eq-tui-claims"  # the default on a host, unless $EQ_TUI_CLAIMS names one
# a claims directory a host entry names: absolute, and nothing a shell would split or expand
CLAIMS_DIR_PATTERN = re.compile(r"/[A-Za-z0-9_.+/-]*")


class ClaimRefused(HostError):
    """The launch was refused by the host's claims (or its GPUs did not drain in time):
    nothing started, nothing was spent."""


def parse_claims(lines: Iterable[str]) -> tuple[GpuClaim, ...]:
    """The probe's `claims` section: `FILE GPU USER PROJECT TOKEN JOB ATTEMPT PID MIB SESSION`
    lines; anything else is skipped."""
    found = []
    for line in lines:
        parts = line.split()
        if len(parts) != 10:
            continue
        name, gpu, user, project, token, job, attempt, pid, mib, session = parts
        if not (gpu.isdigit() and attempt.isdigit() and pid.isdigit()
                and (mib == "-" or mib.isdigit())):
            continue
        found.append(GpuClaim(name, int(gpu), user, project, token, job, int(attempt),
                              int(pid), None if mib == "-" else int(mib), session))
    return tuple(found)


def launch_args(ticket: ClaimTicket | None, claims_dir: str | None, job_id: str, attempt: int,
                gpus: Sequence[int], rules: str | None = None) -> list[str]:
    """launch.sh's claim arguments (none for a job without GPUs, or no ticket); claims_dir
    and rules (the lab's rules file) None: the host's default."""
    if ticket is None or not gpus:
        return []
    return [claims_dir or "-", ticket.project, ticket.token, job_id, str(attempt),
            ",".join(map(str, gpus)), "-" if ticket.mib is None else str(ticket.mib),
            ",".join(ticket.known) or "-", rules or "-",
            "?" if ticket.rules_sum is None else ticket.rules_sum,
            "-" if ticket.max_gpus is None else str(ticket.max_gpus)]


@dataclass(frozen=True)
class WaitingNeed:
    """What this engine's waiting jobs could use on a host (fair turns: _fair_turns.sh yields a
    GPU only to an engine that could take it): the fewest GPUs one of them needs, the least
    memory one that shares a GPU needs on each (its margin included; None: none shares), and
    the free threshold of a GPU for one that wants its GPUs alone (None: none does)."""

    count: int = 1
    share_mib: int | None = None
    alone_below_mib: int | None = None


def want_arg(project: str, token: str, *, waiting: bool, poll_s: float,
             gpus: Iterable[int] | None, need: WaitingNeed | None = None) -> str:
    """probe.sh's WANT: whether this engine (project, token) has jobs waiting for GPUs on the
    host, its poll (whole seconds, at least 1), the GPUs it may use there (None: all) and what
    its waiting jobs need (None: not known, any GPU it may use). Fair turns (_fair_turns.sh)
    give a freed GPU, or freed room on a shared one, to a waiting engine that holds less of the
    host's GPU memory and could use it."""
    allowed = "all" if gpus is None else ",".join(map(str, sorted(gpus))) or "none"

    def field(value: int | None) -> str:
        return "-" if value is None else str(value)

    needs = ("-:-:-" if need is None else
             f"{need.count}:{field(need.share_mib)}:{field(need.alone_below_mib)}")
    return (f"{project}:{token}:{1 if waiting else 0}:{max(1, math.ceil(poll_s))}:{allowed}:"
            f"{needs}")


def refusal(stderr: str) -> str | None:
    """Why launch.sh refused (its `eq-tui: claim refused: WHY` line), if it did."""
    for line in stderr.splitlines():
        _, found, why = line.partition("eq-tui: claim refused: ")
        if found:
            return why.strip()
    return None


def others(claims: Iterable[GpuClaim], project: str, token: str) -> list[GpuClaim]:
    """The claims of engines other than (project, token)."""
    return [claim for claim in claims if not claim.mine(project, token)]


def usage_of(claim: GpuClaim, gpus: Sequence[GpuReading],
             processes: Sequence[GpuProcess]) -> int:
    """What the claim's job uses on its GPU now: its processes are in the group or session its
    wrapper leads."""
    uuid = next((g.uuid for g in gpus if g.index == claim.gpu), None)
    return sum(p.used_mib or 0 for p in processes
               if p.gpu_uuid == uuid and claim.pid in (p.pgid, p.sid))


def pending_by_gpu(claims: Iterable[GpuClaim], gpus: Sequence[GpuReading],
                   processes: Sequence[GpuProcess]) -> dict[int, int | None]:
    """GPU -> what other engines' claims hold there beyond what their jobs use already (their
    usage is in the GPU's reading): a claimed estimate not yet allocated; None: a claim on the
    whole GPU."""
    pending: dict[int, int | None] = {}
    for claim in claims:
        if claim.mib is None:
            pending[claim.gpu] = None
            continue
        before = pending.get(claim.gpu, 0)
        if before is None:
            continue
        pending[claim.gpu] = before + max(0, claim.mib - usage_of(claim, gpus, processes))
    return pending


def known_on(claims: Iterable[GpuClaim], gpus: Sequence[int]) -> tuple[str, ...]:
    """The claims on these GPUs, by name: what a launch says its placement counted."""
    wanted = set(gpus)
    return tuple(sorted(claim.name for claim in claims if claim.gpu in wanted))


def by_gpu(claims: Iterable[GpuClaim]) -> Mapping[int, list[GpuClaim]]:
    found: dict[int, list[GpuClaim]] = {}
    for claim in claims:
        found.setdefault(claim.gpu, []).append(claim)
    return found
