"""What a claim on a host's GPU is, and what a launch takes claims with (claims.py reads and
judges them; hosts/base.py's probe and launch types carry them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuClaim:
    """One live claim on one GPU, as the probe read it."""

    name: str  # its file name in the claims directory (what a launch names as known)
    gpu: int
    user: str
    project: str
    token: str  # the engine's run token: with the project, which engine holds it
    job: str
    attempt: int
    pid: int  # the process holding it (the attempt's wrapper, which leads its group)
    mib: int | None  # the job's estimate on the GPU; None: it has the GPU alone
    session: str

    def mine(self, project: str, token: str) -> bool:
        return self.project == project and self.token == token

    @property
    def who(self) -> str:
        return f"{self.user}'s {self.project}/{self.job}"


@dataclass(frozen=True)
class ClaimTicket:
    """What a launch needs to take its claims: which engine it is, what it holds on each GPU
    (None: the GPUs alone), and the other engines' claims on them that its placement counted."""

    project: str
    token: str
    mib: int | None
    known: tuple[str, ...] = ()
    # the lab's rules file as the engine's probe read it (its cksum, "CRC.SIZE"; "-": there was
    # none; None: not known, not rechecked) and its max_gpus_per_user: the launch rechecks them
    # under the host's lock (_rules_launch.sh)
    rules_sum: str | None = None
    max_gpus: int | None = None
