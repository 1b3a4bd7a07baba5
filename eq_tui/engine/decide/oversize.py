"""A CUDA OOM that no card of that size can hold: how much the attempt asked for (torch's and
JAX's messages), against its card's total, and whether any GPU of the run is larger. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# host -> GPU index -> total memory (MiB) of the GPUs a job may use there; None: not known yet
GpuTotals = Mapping[str, Mapping[int, int] | None]

_NUMBER = r"(\d+(?:\.\d+)?)\s?(bytes|B|KiB|MiB|GiB|TiB)?\b"
# torch: "Tried to allocate 200.00 GiB"; JAX/XLA: "Out of memory while trying to allocate
# 214748364800 bytes", "Out of memory allocating 214748364800 bytes", "Failed to allocate
# request for 200.00GiB (214748364800B)"
_ASK = re.compile(r"(?:tried to allocate|trying to allocate|memory allocating"
                  r"|allocate request for)\s+" + _NUMBER, re.IGNORECASE)
# torch >= 2.1: "GPU 0 has a total capacity of 79.18 GiB"; before: "(GPU 0; 15.78 GiB total
# capacity; ..."
_TOTAL = re.compile(r"total capacity of\s+" + _NUMBER + r"|" + _NUMBER + r"\s+total capacity",
                    re.IGNORECASE)
_MIB_PER = {"bytes": 1 / 2**20, "b": 1 / 2**20, "kib": 1 / 1024, "mib": 1.0, "gib": 1024.0,
            "tib": 1024.0**2}


@dataclass(frozen=True)
class OomAsk:
    """What an OOM message says: the allocation that failed, and the card's total if given."""

    asked_mib: float
    total_mib: float | None = None


@dataclass(frozen=True)
class Oversize:
    """An OOM asking more than its card holds. `largest_mib`: the largest GPU the run knows of
    (None: none known); `floor_mib`: retry only on GPUs with more total memory than this (the
    ask, and never less than the card it ran on: torch's total is a little under the one
    nvidia-smi reads); `unknown`: hosts whose GPUs are not known."""

    asked_mib: float
    card_mib: float
    largest_mib: float | None
    floor_mib: int
    unknown: tuple[str, ...] = ()

    @property
    def fits_somewhere(self) -> bool:
        return self.largest_mib is not None and self.largest_mib > self.floor_mib

    @property
    def detail(self) -> str:
        largest = self.card_mib if self.largest_mib is None else self.largest_mib
        text = f"asked {gib(self.asked_mib)}; the largest GPU has {gib(largest)}"
        if self.unknown:
            text += f" (GPUs not known on {', '.join(self.unknown)})"
        return text

    @property
    def retry_detail(self) -> str:
        return (f"asked {gib(self.asked_mib)} of a {gib(self.card_mib)} GPU; retried only on "
                f"a GPU with more than {gib(self.asked_mib)}")


def gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def _mib(number: str, unit: str | None) -> float:
    """A size as MiB; a bare number is bytes (JAX prints them so)."""
    return float(number) * _MIB_PER[(unit or "bytes").lower()]


def oom_ask(log_tail: str) -> OomAsk | None:
    """The last OOM line of `log_tail` that says how much was asked (None: none says)."""
    for line in reversed(log_tail.splitlines()):
        asked = _ASK.search(line)
        if asked is None:
            continue
        total = _TOTAL.search(line)
        total_mib = None
        if total is not None:
            number, unit = (total.group(1), total.group(2)) if total.group(1) else (
                total.group(3), total.group(4))
            total_mib = _mib(number, unit)
        return OomAsk(_mib(asked.group(1), asked.group(2)), total_mib)
    return None


def oversize(log_tail: str, host: str, gpus: Sequence[int],
             totals: GpuTotals) -> Oversize | None:
    """The OOM in `log_tail` as an ask no card of its size holds, or None (a plain OOM, or the
    sizes are not known). Without the card's total in the message (JAX), the smallest total of
    the GPUs the attempt ran on."""
    ask = oom_ask(log_tail)
    if ask is None:
        return None
    here = totals.get(host) or {}
    # a total of 0 is no reading (a Slurm node's GPUs, a card that would not say)
    probed = [here[gpu] for gpu in gpus if here.get(gpu, 0) > 0]
    card = ask.total_mib if ask.total_mib is not None else (
        float(min(probed)) if probed else None)
    if card is None or ask.asked_mib <= card:
        return None
    every = [total for found in totals.values() if found for total in found.values()
             if total > 0]
    unknown = tuple(name for name, found in totals.items()
                    if not found or not any(total > 0 for total in found.values()))
    floor = max(int(ask.asked_mib), min(probed, default=0))
    return Oversize(ask.asked_mib, card, float(max(every)) if every else None, floor, unknown)
