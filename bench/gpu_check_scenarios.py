"""The six runs of bench/gpu_check.py, each one `eq-tui --no-ui` run of its own on one GPU, and
its figures: nvidia-smi's readings (the sampler) beside eq-tui's records (queue_state.json,
events.jsonl)."""

from __future__ import annotations

import functools
import itertools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.gpu_check_harness import (
    TORCH_OVERHEAD_MIB,
    Jobs,
    Run,
    Sample,
    Sampler,
    Section,
    eq_tui,
    jobs_yaml,
    read_state,
    run_eq,
)
from tests.support.ground_truth import most_overlapping

MARGIN_MIB = 1024  # eq-tui's gpu_margin_mib default
PROGRESS = ("step ", "epoch ")


@dataclass(frozen=True)
class Config:
    quick: bool
    poll: float = 2.0

    @property
    def pack_seconds(self) -> float:
        return 8 if self.quick else 20

    @property
    def short_seconds(self) -> float:
        return 3 if self.quick else 8

    @property
    def neighbour_seconds(self) -> float:
        return 40 if self.quick else 90

    @property
    def stall_after(self) -> float:
        return 10 if self.quick else 20

    @property
    def oom_delay(self) -> float:
        return 3 if self.quick else 5


@dataclass(frozen=True)
class Bench:
    """What every run needs: the jobs, the sampler, the work dir, the card's total memory."""

    jobs: Jobs
    sampler: Sampler
    work: Path
    total_mib: int
    config: Config

    def run(self, name: str, body: str, timeout: float,
            during: Callable[[Path], bool] | None = None) -> Run:
        return run_eq(self.jobs, self.sampler, self.work, name, body, poll=self.config.poll,
                      timeout=timeout, during=during)

    def samples(self, run: Run) -> list[Sample]:
        return self.sampler.window(run.started - 1, run.ended + 2)


def job_mib(bench: Bench, samples: list[Sample], project: str) -> list[dict[str, int]]:
    """Per sample: job -> the MiB its processes hold (nvidia-smi's compute-apps)."""
    found = []
    for sample in samples:
        per: dict[str, int] = {}
        for app in sample.apps:
            owner = bench.sampler.owners.get(app.pid)
            if owner is not None and owner.project == project:
                per[owner.job] = per.get(owner.job, 0) + app.mib
        found.append(per)
    return found


def attempt_spans(run: Run) -> list[tuple[float, float]]:
    return [(a["start"], a["end"] or run.ended) for j in run.state.get("jobs", [])
            for a in j.get("history", []) if a.get("start")]


def first_absent(samples: list[Sample], pids: set[int], after: float) -> float | None:
    """When none of `pids` held GPU memory any more, from `after` on."""
    for sample in samples:
        if sample.t >= after and not pids & {app.pid for app in sample.apps}:
            return sample.t
    return None


def gap(since: float | None, then: float | None) -> float | None:
    return None if since is None or then is None else then - since


def present(samples: list[Sample], pids: set[int]) -> list[float]:
    return [s.t for s in samples if pids & {app.pid for app in s.apps}]


# -- 1. packed jobs ------------------------------------------------------------------------

def packed(bench: Bench, count: int = 6) -> Section:
    mem = (bench.total_mib - 2 * MARGIN_MIB) // count // 256 * 256
    alloc = mem - 2048  # the context and matmul buffers on top stay below what it declares
    names = [f"pk{i}" for i in range(count)]
    body = jobs_yaml((n, bench.jobs.train(alloc, bench.config.pack_seconds), mem)
                     for n in names)
    run = bench.run("packed", body, timeout=600)
    per_sample = job_mib(bench, bench.samples(run), run.project)
    section = Section("packed")
    smi_most = max((len(p) for p in per_sample), default=0)
    eq_most = most_overlapping(attempt_spans(run))
    section.figures.update({"jobs": count, "mem_mib": mem, "alloc_mib": alloc,
                            "exit_code": run.exit_code, "most_at_once_smi": smi_most,
                            "most_at_once_eq": eq_most, "peaks": {}})
    section.row(f"{count} jobs x {mem} MiB declared: most at once", smi_most, eq_most,
                ("packed: all at once, both agree", smi_most == eq_most == count))
    for name in names:
        smi_peak = max((p.get(name, 0) for p in per_sample), default=0)
        eq_peak = max((a.get("peak_mib") or 0 for a in run.attempts(name)), default=0)
        section.figures["peaks"][name] = {"smi": smi_peak, "eq": eq_peak}
        close = abs(smi_peak - eq_peak) <= max(64, 0.03 * smi_peak)
        section.row(f"peak MiB {name} (declared {mem})", smi_peak, eq_peak,
                    (f"packed: {name} peak agrees", close and 0 < eq_peak <= mem))
    done = [j["id"] for j in run.state.get("jobs", []) if j["status"] == "completed"]
    section.row("completed", "-", f"{len(done)}/{count}",
                ("packed: all completed", len(done) == count))
    return section


# -- 2. CUDA OOM once and always -----------------------------------------------------------

def ooms(bench: Bench) -> Section:
    body = (f"oom_retry: {{delay: {bench.config.oom_delay:g}, max_attempts: 3}}\n"
            + jobs_yaml([("oom_once", bench.jobs.oom_once(2048, bench.config.short_seconds,
                                                          bench.total_mib), None),
                         ("oom_always", bench.jobs.oom_always(), None)]))
    run = bench.run("oom", body, timeout=300)
    section = Section("oom")
    for name in ("oom_once", "oom_always"):
        record = run.job(name)
        attempts = run.attempts(name)
        seen = bench.sampler.pids_of(run.project, name)
        section.figures[name] = {
            "status": record["status"], "attempts": len(attempts),
            "classes": [a.get("failure_class") for a in attempts],
            "reason": record.get("reason"), "processes_on_gpu_smi": len(seen)}
    once, always = section.figures["oom_once"], section.figures["oom_always"]
    section.row("oom_once: processes seen on the GPU / attempts", once["processes_on_gpu_smi"],
                once["attempts"])
    section.row("oom_once: classes, final status", "-",
                f"{','.join(str(c) for c in once['classes'])} -> {once['status']}",
                ("oom: once retried then completed", once["status"] == "completed"
                 and once["attempts"] == 2 and once["classes"][0] == "cuda_oom"))
    reason = str(always["reason"] or "")
    section.row("oom_always (200 GiB): processes seen / attempts -> status",
                always["processes_on_gpu_smi"],
                f"{always['attempts']} -> {always['status']}",
                ("oom: always stuck after one attempt",
                 always["status"] == "stuck" and always["attempts"] == 1))
    section.row("oom_always reason", "-", reason,
                ("oom: always reason names the largest GPU",
                 reason.startswith("asked ") and "the largest GPU has" in reason))
    return section


# -- 3. a hang beside a computing neighbour --------------------------------------------------

def stall_times(run: Run) -> tuple[float | None, float | None]:
    """When eq-tui called the hang stalled, and when it acted on it (on_stall: kill)."""
    stalls = run.of_type("job_stalled", "hang")
    alert = next((e["at"] for e in stalls if e.get("action") == "alert"), None)
    acted = next((e["at"] for e in stalls if e.get("action") == "kill"), None)
    if acted is None:
        acted = next((e["at"] for e in run.of_type("job_state_changed", "hang")
                      if e.get("new") == "killed"), None)
    return alert, acted


def hang_figures(bench: Bench, run: Run) -> dict[str, Any]:
    samples = bench.samples(run)
    silent = bench.jobs.silent_since(run.log("hang"), run.run_dir, "hang")
    alert, killed = stall_times(run)
    pids = bench.sampler.pids_of(run.project, "hang")
    neighbour_pids = bench.sampler.pids_of(run.project, "neighbour")
    both = [s for s in samples if pids & {a.pid for a in s.apps}
            and neighbour_pids & {a.pid for a in s.apps}]
    freed = first_absent(samples, pids, killed) if killed and pids else None
    neighbour_end = (run.attempts("neighbour") or [{}])[-1].get("end")
    return {
        "stall_after_s": bench.config.stall_after, "poll_s": bench.config.poll,
        "silent_since": silent, "stalled_at": alert, "killed_at": killed,
        "detection_s": gap(silent, alert), "kill_after_silence_s": gap(silent, killed),
        "memory_freed_after_kill_s": gap(killed, freed), "samples_sharing_gpu": len(both),
        "card_util_while_shared_pct": round(statistics.median([s.util for s in both]))
        if both else None,
        "status": run.job("hang")["status"],
        "neighbour_status": run.job("neighbour")["status"],
        "neighbour_false_stalls": len(run.of_type("job_stalled", "neighbour")),
        "neighbour_ended_after_kill": bool(killed and neighbour_end and neighbour_end > killed)}


def hang(bench: Bench) -> Section:
    config = bench.config
    body = (f"stall_after: {config.stall_after:g}s\non_stall: kill\n"
            + jobs_yaml([("hang", bench.jobs.hang(2048), 2048 + 2 * TORCH_OVERHEAD_MIB),
                         ("neighbour", bench.jobs.train(4096, config.neighbour_seconds),
                          4096 + 2 * TORCH_OVERHEAD_MIB)]))
    run = bench.run("hang", body, timeout=config.neighbour_seconds + 300)
    found = hang_figures(bench, run)
    detect = found["detection_s"]
    section = Section("hang", found)
    section.row("hang and neighbour on the GPU together (samples)",
                found["samples_sharing_gpu"], "-",
                ("hang: shared the GPU with the neighbour", found["samples_sharing_gpu"] > 0))
    section.row("card utilisation while both held it (%)", found["card_util_while_shared_pct"])
    section.row(f"last log line -> job_stalled (s; stall_after {config.stall_after:g})", "-",
                detect, ("hang: detected not before stall_after, within two polls after",
                         detect is not None and config.stall_after <= detect
                         <= config.stall_after + 2 * config.poll))
    section.row("last log line -> killed (s; on_stall: kill)", "-",
                found["kill_after_silence_s"], ("hang: killed", found["status"] == "killed"))
    section.row("hang's memory gone after the kill (s)", found["memory_freed_after_kill_s"])
    section.row("neighbour: false stalls, status", "-",
                f"{found['neighbour_false_stalls']}, {found['neighbour_status']}",
                ("hang: neighbour completed, never flagged", found["neighbour_false_stalls"] == 0
                 and found["neighbour_status"] == "completed"))
    section.row("neighbour still computing when the hang was killed", "-",
                found["neighbour_ended_after_kill"],
                ("hang: killed while the neighbour ran", found["neighbour_ended_after_kill"]))
    return section


# -- 4. a leaked child in its own session ----------------------------------------------------

def leak(bench: Bench) -> Section:
    body = jobs_yaml([("leak", bench.jobs.leak(1024, 2048, bench.config.short_seconds), None)])
    run = bench.run("leak", body, timeout=300)
    samples = bench.samples(run)
    attempts = run.attempts("leak")
    end = attempts[-1].get("end") if attempts else None
    pids = bench.sampler.pids_of(run.project, "leak")
    # the child: the job's process in a session of its own (the job itself runs in its
    # launcher's); it outlived its job when a reading after the job's end still lists it (eq-tui
    # may end it within a few readings)
    children = {p for p in pids if bench.sampler.own_session(p)
                and end and any(t > end for t in present(samples, {p}))}
    freed = first_absent(samples, children, end) if children and end else None
    alert = next((e for e in run.of_type("alert", "leak") if "leftover" in e["message"]), None)
    cleanup = attempts[-1].get("cleanup", "") if attempts else ""
    section = Section("leak")
    section.figures.update({
        "status": run.job("leak")["status"], "child_pids_smi": sorted(children),
        "cleanup": cleanup, "alert_after_end_s": gap(end, alert["at"] if alert else None),
        "child_memory_freed_after_end_s": gap(end, freed)})
    section.row("child still holding memory after its job ended", len(children), "-",
                ("leak: the child outlived its job on the GPU", len(children) > 0))
    section.row("eq-tui's cleanup record", "-", (cleanup or "(none)")[:60],
                ("leak: cleanup recorded", bool(cleanup)))
    section.row("after the job's end (s): child's memory gone / cleanup alert",
                section.figures["child_memory_freed_after_end_s"],
                section.figures["alert_after_end_s"],
                ("leak: child's memory freed", freed is not None))
    return section


def exit_file(attempt: dict[str, Any]) -> str | None:
    """The attempt's `exit` file on the host: the command's real exit code."""
    try:
        return (Path(attempt["attempt_dir"]) / "exit").read_text().strip()
    except (OSError, KeyError):
        return None


# -- 5. a shell kill of a running job --------------------------------------------------------

def kill_when_computing(issued: dict[str, Any], run_dir: Path) -> bool:
    """Once the victim has printed two progress lines: `eq-tui kill RUN_DIR victim`, timed."""
    record = next((j for j in read_state(run_dir).get("jobs", []) if j["id"] == "victim"), None)
    if record is None or record["status"] != "running" or not record.get("log"):
        return False
    try:
        lines = Path(record["log"]).read_text(errors="replace").splitlines()
    except OSError:
        return False
    if sum(line.startswith(PROGRESS) for line in lines) < 2:
        return False
    issued["at"] = time.time()
    done = eq_tui("kill", str(run_dir), "victim")
    issued.update({"returned_s": time.time() - issued["at"], "rc": done.returncode,
                   "said": (done.stdout + done.stderr).strip().splitlines()[:1]})
    return True


def kill(bench: Bench) -> Section:
    body = jobs_yaml([("victim", bench.jobs.train(8192, 300), None)])
    issued: dict[str, Any] = {}
    run = bench.run("kill", body, timeout=600,
                    during=functools.partial(kill_when_computing, issued))
    samples = bench.samples(run)
    pids = bench.sampler.pids_of(run.project, "victim")
    at = issued.get("at")
    gone = first_absent(samples, pids, at) if at and pids else None
    idle = min((s.used_mib for s in samples[:5]), default=0) + 256
    settled = next((s.t for s in samples if at and s.t >= at and s.used_mib <= idle), None)
    attempts = run.attempts("victim")
    section = Section("kill")
    section.figures.update({
        "kill_command": issued, "status": run.job("victim")["status"],
        "exit_file": exit_file(attempts[-1]) if attempts else None,
        "exit_code_in_state": attempts[-1].get("exit_code") if attempts else None,
        "process_memory_gone_after_kill_s": gap(at, gone),
        "card_back_to_idle_after_kill_s": gap(at, settled)})
    section.row("`eq-tui kill` returned after (s), rc", "-",
                f"{issued.get('returned_s', 0):.2f}, rc {issued.get('rc')}",
                ("kill: command succeeded", issued.get("rc") == 0))
    section.row("job's memory gone after the kill (s)",
                section.figures["process_memory_gone_after_kill_s"], "-",
                ("kill: memory freed", gone is not None))
    section.row("card back to idle after the kill (s)",
                section.figures["card_back_to_idle_after_kill_s"])
    section.row("status, the attempt's exit record", "-",
                f"{section.figures['status']}, exit {section.figures['exit_file']}",
                ("kill: job killed", section.figures["status"] == "killed"))
    return section


# -- 6. whole-card jobs one after another ----------------------------------------------------

def released_at(samples: list[Sample], pids: set[int]) -> tuple[float | None, float | None]:
    """When `pids` last held memory, and the middle between that sample and the next (the
    release, to half a sampling period)."""
    last = max(present(samples, pids), default=None)
    after = first_absent(samples, pids, last + 1e-6) if last is not None else None
    return last, None if last is None or after is None else (last + after) / 2


def handovers(bench: Bench, run: Run, names: list[str]) -> list[dict[str, Any]]:
    samples = bench.samples(run)
    found = []
    for before, after in itertools.pairwise(names):
        last, released = released_at(samples, bench.sampler.pids_of(run.project, before))
        new = bench.sampler.pids_of(run.project, after)
        shown = min(present(samples, new), default=None)
        started = min((o.started for p in new if (o := bench.sampler.owners.get(p))
                       and o.started), default=None)
        attempt = (run.attempts(after) or [{}])[0]
        eq_start = attempt.get("start")
        reached = reached_host(attempt)
        found.append({
            "released": released, "exec_gap_s": gap(released, started),
            "visible_gap_s": gap(released, shown), "eq_start_gap_s": gap(released, eq_start),
            "double_booked": bool(started and last and started < last),
            "launch_on_host_s": gap(released, reached)})
    return found


def reached_host(attempt: dict[str, Any]) -> float | None:
    """When the launch was on the host: launch.sh writes the attempt's `cmd` before anything
    else, and before a drain wait (a launch placed while the last job's memory drained)."""
    try:
        return (Path(attempt["attempt_dir"]) / "cmd").stat().st_mtime
    except (KeyError, OSError):
        return None


def spread(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known):.2f} / {max(known):.2f}" if known else "n/a"


def sequential(bench: Bench, count: int = 3) -> Section:
    big = int(bench.total_mib * 0.85) - TORCH_OVERHEAD_MIB
    names = [f"whole{i}" for i in range(count)]
    body = jobs_yaml((n, bench.jobs.train(big, bench.config.short_seconds), None)
                     for n in names)
    run = bench.run("sequential", body, timeout=600)
    found = handovers(bench, run, names)
    section = Section("sequential")
    section.figures.update({"jobs": count, "alloc_mib": big, "handovers": found,
                            "release_resolution_s": bench.sampler.interval / 2})
    for key in ("exec_gap_s", "visible_gap_s", "eq_start_gap_s"):
        known = [h[key] for h in found if h[key] is not None]
        section.figures[f"{key[:-2]}_median_s"] = statistics.median(known) if known else None
        section.figures[f"{key[:-2]}_max_s"] = max(known) if known else None
    section.row("reuse gap median / max (s): released -> next process started",
                spread([h["exec_gap_s"] for h in found]))
    section.row("  ... -> next process on the GPU (after its CUDA init)",
                spread([h["visible_gap_s"] for h in found]))
    section.row("  ... -> next attempt's start record", "-",
                spread([h["eq_start_gap_s"] for h in found]))
    early = [h["launch_on_host_s"] for h in found if h["launch_on_host_s"] is not None]
    section.figures["launches_on_host_before_release"] = sum(1 for v in early if v < 0)
    section.row("  launches on the host before the release (drain wait)",
                f"{sum(1 for v in early if v < 0)} of {len(found)}", "-")
    doubled = sum(1 for h in found if h["double_booked"])
    section.row("next job started while the last one still held memory", doubled, "-",
                ("sequential: no double booking", doubled == 0 and len(found) == count - 1
                 and all(h["released"] is not None for h in found)))
    return section


def energy(bench: Bench) -> Section:
    from bench.gpu_check_energy import energy as run_energy

    return run_energy(bench)


RUNS: dict[str, Callable[[Bench], Section]] = {
    "packed": packed, "oom": ooms, "hang": hang, "leak": leak, "kill": kill,
    "sequential": sequential, "energy": energy}
