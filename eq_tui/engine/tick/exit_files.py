"""A finished attempt's metric files ride on the probe that sees its exit: each probe names,
for every attempt it watches, the files harvest would read once it ends (results/collect.py's
`wanted_files`); probe.sh reads them only for an attempt that has exited. What it brought is
kept here until harvest takes it, so a hand-over costs no extra round trip to the host (and
no extra process there) while the next job starts."""

from __future__ import annotations

from collections.abc import Iterable

from eq_tui.engine.context import RunContext
from eq_tui.hosts.base import AttemptRef, HostSnapshot, ProbeRequest
from eq_tui.results.collect import Wanted, wanted_files

KEPT = 1024  # attempts whose files wait for harvest (it takes them within a tick or two)

Texts = tuple[str | None, ...]


def exit_reads(ctx: RunContext, refs: Iterable[AttemptRef]
               ) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What each watched attempt's probe should read once it has exited."""
    reads = []
    for ref in refs:
        job = ctx.ledger.jobs.get(ref.key)
        current = job.current if job is not None else None
        if current is None or current.attempt_dir != ref.attempt_dir:
            continue
        paths = tuple(w.path for w in wanted_for(ctx, ref.key, current.attempt_dir, current.n))
        if paths:
            reads.append((ref.key, paths))
    return tuple(reads)


def wanted_for(ctx: RunContext, job_id: str, attempt_dir: str, attempt: int) -> list[Wanted]:
    spec = ctx.ledger.specs.get(job_id)
    return wanted_files(spec.metrics if spec else None, attempt_dir=attempt_dir,
                        run_dir=ctx.run_dir_value(), job_id=job_id, attempt=attempt)


class ExitFiles:
    """The files probes brought, by attempt dir, until harvest takes them."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[tuple[str, ...], Texts]] = {}

    def take_in(self, request: ProbeRequest, snapshot: HostSnapshot) -> None:
        if not request.exit_reads or not snapshot.ok:
            return
        dirs = {ref.key: ref.attempt_dir for ref in request.attempts}
        for key, paths in request.exit_reads:
            probe = snapshot.attempts.get(key)
            if probe is not None and probe.exit_files is not None and key in dirs:
                self._kept[dirs[key]] = (paths, probe.exit_files)
        while len(self._kept) > KEPT:
            del self._kept[next(iter(self._kept))]

    def take(self, attempt_dir: str, wanted: list[Wanted]) -> Texts | None:
        """The texts of `wanted`, when the probe that saw the attempt's exit read exactly
        those files; None: read them now."""
        kept = self._kept.pop(attempt_dir, None)
        if kept is None or kept[0] != tuple(w.path for w in wanted):
            return None
        return kept[1]
