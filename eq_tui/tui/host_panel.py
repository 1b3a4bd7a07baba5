"""One host in full: its link state and round trip, its GPU totals, and one line per GPU; for a
Slurm host, its job slots in use and one line per node of its partition."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual.content import Content
from textual.widgets import Static

from eq_tui.api.holders import holders_text, theirs
from eq_tui.tui.gpu_segments import has_shared, shared_bar, shared_jobs
from eq_tui.tui.host_line import DRAINED_STYLE, drained_text, gpu_totals, rtt_text, state_text

MEMORY_BAR_WIDTH = 10
SHARED_BAR_MAX = 40
# a GPU line without its bar: "2 ", " 41.0/80.0G ", "100%", " ", and room for a holder
LINE_BESIDE_BAR = 2 + 13 + 4 + 1 + 16
DEFAULT_WIDTH = 44  # a panel's text before it has been laid out
NODE_BAR_WIDTH = 8
NODE_JOBS_SHOWN = 2  # ids listed per node line; the rest as "+N"
_MODEL_NOISE = ("NVIDIA ", "GeForce ", "Tesla ", " (sim)")


def short_model(name: str | None) -> str:
    text = name or "?"
    for noise in _MODEL_NOISE:
        text = text.replace(noise, "")
    return text[:20]


def memory_bar(used: float | None, total: float | None, threshold: float,
               width: int = MEMORY_BAR_WIDTH) -> Content:
    """A bar of memory used, with `│` where the free threshold lies (a GPU is free left of it)."""
    if not total or used is None:
        return Content.styled("?" * width, "dim")
    filled = max(0, min(width, round(used / total * width)))
    mark = max(0, min(width - 1, int(threshold / total * width)))
    style = "$success" if used < threshold else "$primary"
    cells: list[tuple[str, str]] = []
    for i in range(width):
        if i == mark and i >= filled:
            cells.append(("│", "$warning"))
        elif i < filled:
            cells.append(("█", style))
        else:
            cells.append(("░", "dim"))
    return Content.assemble(*cells)


def gib(mib: float | None) -> str:
    return "?" if mib is None else f"{mib / 1024:.1f}"


def bar_width(host: Mapping[str, Any], width: int) -> int:
    """The memory bars of a host with a shared GPU widen into the room the panel has (all of
    them, so that its lines stay aligned), for each job's id to fit in its segment."""
    if not has_shared(host):
        return MEMORY_BAR_WIDTH
    return max(MEMORY_BAR_WIDTH, min(SHARED_BAR_MAX, width - LINE_BESIDE_BAR))


def gpu_line(gpu: Mapping[str, Any], threshold: float,
             width: int = MEMORY_BAR_WIDTH) -> Content:
    """`width`: the memory bar's. A GPU several of our jobs share shows them as segments of
    it, and how many they are."""
    used, total = gpu.get("memory_used_mib"), gpu.get("memory_total_mib")
    util = gpu.get("utilization_pct")
    shared = shared_jobs(gpu)
    if gpu.get("quarantined"):
        reason = str(gpu.get("quarantine_reason") or "")
        holder: tuple[str, str] = (f"quarantined: {reason[:40]}" if reason else "quarantined",
                                   "bold $error")
    elif shared:
        holder = (f"{len(shared)} jobs", "bold $primary")
    elif gpu.get("job"):
        holder = (str(gpu["job"]), "$primary")
    elif gpu.get("drained"):  # a person's `eq-tui drain`: nothing new launches there
        holder = ("drained", DRAINED_STYLE)
    elif gpu.get("settling"):
        holder = ("settling", "$warning")
    elif theirs(gpu):  # another eq-tui user's job (by its claim), someone's process
        holder = (holders_text(gpu, first_only=True), "$warning")
    elif gpu.get("other"):
        holder = (other_text(gpu.get("others") or []), "$warning")
    elif gpu.get("rule"):  # the lab's rules keep it from us now
        holder = (rule_text(str(gpu["rule"])), "dim")
    elif not gpu.get("allowed", True):
        holder = ("not ours", "dim")
    else:
        holder = ("free", "$success")
    bar = shared_bar(gpu, width) if shared else memory_bar(used, total, threshold, width)
    return Content.assemble(
        (f"{gpu.get('index', '?')} ", "bold"), bar,
        f" {gib(used):>5}/{gib(total):<5}G ",
        (f"{util:>3}%" if util is not None else "  ?%", "dim"), " ", holder)


def rule_text(rule: str) -> str:
    """`box1 keeps GPU 7 free for interactive use (09:00-19:00)` -> `rule: free for interactive
    use (09:00-19:00)`: the panel already names the host and the GPU."""
    _, found, rest = rule.partition(" GPU ")
    what = rest.split(" ", 1)[1] if found and " " in rest else rule
    return f"rule: {what.removeprefix('free ')}"[:48]


def other_text(others: list[dict[str, Any]]) -> str:
    """Whose memory it is: `other: pid 4242 alice python eval.py` (the first process)."""
    if not others:
        return "other process"
    first = others[0]
    command = str(first.get("command") or "").split("/")[-1][:24]
    more = f" +{len(others) - 1}" if len(others) > 1 else ""
    return f"other: pid {first.get('pid')} {first.get('user') or '?'} {command}{more}".rstrip()


def models_text(gpus: list[dict[str, Any]]) -> str:
    """`RTX 4090 x4`, or the distinct models when a host mixes them."""
    names = [short_model(g.get("name")) for g in gpus]
    distinct = sorted(set(names))
    if len(distinct) == 1:
        return f"{distinct[0]} x{len(names)}"
    return ", ".join(distinct)


def host_title(name: str, host: Mapping[str, Any]) -> Content:
    rtt = rtt_text(host)
    return Content.assemble((name, "bold"), " ", state_text(host), f" {rtt}" if rtt else "",
                            drained_text(host))


def count_bar(used: int, total: int, width: int = NODE_BAR_WIDTH) -> Content:
    """GPUs allocated out of a node's total, one cell per GPU when they fit."""
    if total <= 0:
        return Content.styled("·" * width, "dim")
    filled = max(0, min(width, round(used / total * width)))
    return Content.assemble(("█" * filled, "$primary"), ("░" * (width - filled), "dim"))


def node_state_style(state: str) -> str:
    upper = state.upper()
    if any(word in upper for word in ("DOWN", "FAIL", "NOT_RESPONDING")) or upper.endswith("*"):
        return "bold $error"
    if "DRAIN" in upper or "MAINT" in upper or "RESERVED" in upper:
        return "$warning"
    if upper.startswith("IDLE"):
        return "$success"
    return "$primary"


def node_lines(nodes: list[dict[str, Any]]) -> list[Content]:
    """One line per node: name, Slurm state, GPUs allocated / total, our jobs running there."""
    name_width = min(16, max(len(str(n.get("name", ""))) for n in nodes))
    state_width = min(12, max(len(str(n.get("state", ""))) for n in nodes))
    lines = []
    for node in nodes:
        used, total = int(node.get("gpus_used") or 0), int(node.get("gpus_total") or 0)
        jobs = [str(j) for j in node.get("jobs") or []]
        shown = ", ".join(jobs[:NODE_JOBS_SHOWN])
        more = f" +{len(jobs) - NODE_JOBS_SHOWN}" if len(jobs) > NODE_JOBS_SHOWN else ""
        state = str(node.get("state", "?"))
        lines.append(Content.assemble(
            (f"{str(node.get('name', '?'))[:name_width]:<{name_width}} ", "bold"),
            (f"{state[:state_width]:<{state_width}}", node_state_style(state)), " ",
            count_bar(used, total), f" {used}/{total} ", (shown, "$primary"), (more, "dim")))
    return lines


def slots_line(host: Mapping[str, Any]) -> Content:
    """A Slurm host's GPUs are job slots: how many of ours Slurm has, and how many run."""
    gpus = host.get("gpus") or []
    ours = sum(1 for gpu in gpus if gpu.get("job"))
    running = len({job for node in host.get("nodes") or [] for job in node.get("jobs") or []})
    queued = max(0, ours - running)
    return Content.assemble(("slots ", "dim"), f"{ours}/{len(gpus)}",
                            (" · ", "dim"), f"{running} running",
                            (" · ", "dim"), (f"{queued} queued", "$warning" if queued else ""))


def host_body(host: Mapping[str, Any], threshold: float, width: int = DEFAULT_WIDTH
              ) -> Content:
    """`width`: the panel's, for the memory bars of a host whose GPUs are shared."""
    lines: list[Content] = []
    if host.get("state") == "down":
        lines.append(Content.styled(f"down: {host.get('reason') or 'unreachable'}",
                                    "bold $error"))
    if host.get("stopped"):
        lines.append(Content.styled(f"launching stopped: {host['stopped']}", "$warning"))
    gpus = host.get("gpus") or []
    nodes = host.get("nodes") or []
    if host.get("kind") == "slurm" or nodes:
        if gpus:
            lines.append(slots_line(host))
        lines.extend(node_lines(nodes) if nodes else [])
        if not nodes and host.get("state") != "down":
            lines.append(Content.styled("waiting for the node list…", "dim"))
        return Content("\n").join(lines)
    bars = bar_width(host, width)
    lines.extend(gpu_line(gpu, threshold, bars) for gpu in gpus)
    if not gpus and host.get("state") != "down":
        lines.append(Content.styled("waiting for the first probe…", "dim"))
    return Content("\n").join(lines)


def host_subtitle(host: Mapping[str, Any]) -> str:
    nodes = host.get("nodes") or []
    if nodes:
        used = sum(int(n.get("gpus_used") or 0) for n in nodes)
        total = sum(int(n.get("gpus_total") or 0) for n in nodes)
        return f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}, {used}/{total} GPUs in use"
    if host.get("kind") == "slurm":
        return "slurm"
    gpus = host.get("gpus") or []
    return f"{gpu_totals(gpus)} · {models_text(gpus)}" if gpus else ""


def body_height(host: Mapping[str, Any]) -> int:
    """Lines of `host_body`, without rendering it (the grid plans its rows with this)."""
    gpus, nodes = host.get("gpus") or [], host.get("nodes") or []
    lines = int(host.get("state") == "down") + int(bool(host.get("stopped")))
    if host.get("kind") == "slurm" or nodes:
        return lines + int(bool(gpus)) + (len(nodes) or int(host.get("state") != "down"))
    return lines + (len(gpus) or int(host.get("state") != "down"))


class HostPanel(Static):
    """One host in full: a panel of the grid, or the selected host beside the compact lines."""

    _shown: tuple[Mapping[str, Any], float, int] | None = None

    def show(self, name: str, host: Mapping[str, Any], threshold: float) -> None:
        self.border_title = host_title(name, host)
        self.border_subtitle = host_subtitle(host)
        self.set_class(host.get("state") == "down", "-down")
        self._draw(host, threshold)

    def _draw(self, host: Mapping[str, Any], threshold: float) -> None:
        width = self.content_size.width or DEFAULT_WIDTH
        self._shown = (host, threshold, width)
        self.update(host_body(host, threshold, width))

    def on_resize(self) -> None:
        """The bars of shared GPUs take the width the panel gets once laid out."""
        shown = self._shown
        if shown is not None and shown[2] != self.content_size.width and has_shared(shown[0]):
            self._draw(shown[0], shown[1])
