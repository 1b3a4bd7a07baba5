"""The engine keeps the lab's rules (hosts/lab_rules.py) a host's probe read: what placement may
use there, in the order the rules prefer, and why a job waits on a rule ("box1 keeps GPU 7 free
for interactive use (09:00-19:00)")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from eq_tui.engine.decide.placement import HostView
from eq_tui.hosts.base import HostSnapshot
from eq_tui.hosts.lab_rules import closed_gpus, preferred, user_cap


def with_rules(view: HostView, snap: HostSnapshot | None) -> HostView:
    """The host as placement may use it under the lab's rules: GPUs kept free, reserved for
    others or kept for interactive use now are not ours to take; at the per-user limit while
    others wait, only GPUs we hold already (to share); free GPUs in the preferred order. The
    rules that closed something go in `notes`, for the waiting reasons."""
    lab = snap.lab if snap is not None else None
    if lab is None or lab.rules is None or snap is None:
        return view
    every = frozenset(gpu.index for gpu in view.gpus)
    allowed = view.allowed if view.allowed is not None else every
    closed = closed_gpus(lab, view.name)
    notes = [why for gpu, why in sorted(closed.items()) if gpu in allowed]
    allowed = allowed - closed.keys()
    held = {claim.gpu for claim in snap.claims if claim.user == lab.user}
    cap = user_cap(lab, view.name, held)
    if cap is not None:
        allowed &= held
        notes.append(cap)
    order = {gpu: i for i, gpu in enumerate(preferred(lab.rules.prefer, sorted(every)))}
    gpus = tuple(sorted(view.gpus, key=lambda gpu: order.get(gpu.index, len(order))))
    if allowed == view.allowed and not notes and gpus == view.gpus:
        return view
    return replace(view, allowed=frozenset(allowed), gpus=gpus, notes=tuple(notes))


def rule_reasons(name: str, snap: HostSnapshot | None) -> Mapping[int, str]:
    """GPU -> the rule that keeps it from us now (the grid says it)."""
    lab = snap.lab if snap is not None else None
    if lab is None:
        return {}
    return closed_gpus(lab, name)
