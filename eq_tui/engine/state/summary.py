"""summary.md: what a finished (or stopped) queue did, for a person reading it the next morning."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence

from eq_tui.api.model import NEEDS_PERSON, FailureClass, JobState, JobStatus, status_counts
from eq_tui.present.durations import format_duration
from eq_tui.results.cost import energy_text, job_cost


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))




def oom_retries(job: JobState) -> int:
    return sum(1 for a in job.history if a.failure_class == FailureClass.CUDA_OOM)


def _gpu_span(job: JobState) -> float | None:
    """Its current attempt's GPU-seconds: time from start to end, times its GPUs."""
    current = job.current
    if current is None or current.start is None or current.end is None:
        return None
    return (current.end - current.start) * max(1, len(current.gpus))


def early_stop_lines(jobs: Sequence[JobState]) -> list[str]:
    """What early stopping saved: each pruned job's time left to its phase's median completed
    duration (the finished jobs' rate), times its GPUs; none without a pruned job."""
    pruned = [j for j in jobs if j.status == JobStatus.PRUNED]
    if not pruned:
        return []
    used = saved = 0.0
    unknown = 0
    for job in pruned:
        span = _gpu_span(job)
        full = [s / max(1, len(j.gpus)) for j in jobs
                if j.phase == job.phase and j.status == JobStatus.COMPLETED
                and (s := _gpu_span(j)) is not None]
        if span is None or not full:
            unknown += 1
            continue
        used += span
        saved += max(0.0, statistics.median(full) * max(1, len(job.gpus)) - span)
    lines = ["", "## Early stopping", "",
             f"- pruned: {len(pruned)} jobs (partial numbers; see the results table)",
             f"- GPU-hours they used: {used / 3600:.3g}",
             f"- GPU-hours saved: about {saved / 3600:.3g}, against training them to the end "
             "(each one's time left to the median duration of its phase's completed jobs)"]
    if unknown:
        lines.append(f"- not estimated: {unknown} (no completed job of their phase to go by)")
    return lines




def cost_lines(jobs: Sequence[JobState]) -> list[str]:
    """The sweep's GPU-hours and energy: every job, every attempt (a failed or pruned one
    spent them too)."""
    hours, joules, unknown = 0.0, 0.0, 0
    for job in jobs:
        gpu_s, energy = job_cost(job.history)
        hours += gpu_s / 3600
        if energy is None:
            unknown += 1
        else:
            joules += energy
    if not hours and not unknown:
        return []
    energy_line = f"- energy: {energy_text(joules)}"
    if unknown:
        why = "no power reading: a Slurm GPU, a card without one, a CPU-only job"
        energy_line = (f"- energy: unknown ({why})" if unknown == len(jobs) else
                       f"- energy: unknown for {unknown} of {len(jobs)} jobs ({why}); "
                       f"{energy_text(joules)} for the others")
    return ["", "## Cost", "", f"- GPU-hours: {hours:.3g} (time x GPUs; a shared GPU by "
            "the share each job held)", energy_line]


def render_summary(project: str, jobs: Sequence[JobState], *, started: float | None,
                   ended: float | None, log_tails: Mapping[str, Sequence[str]]) -> str:
    counts = status_counts(jobs)
    completed_after_oom = [j for j in jobs if j.status == JobStatus.COMPLETED and oom_retries(j)]
    wall = ended - started if started is not None and ended is not None else None
    lines = [
        f"# eq-tui summary: {project}",
        "",
        f"- start: {_when(started)}",
        f"- end: {_when(ended)}",
        f"- wall-clock: {format_duration(wall, '-')}",
        f"- jobs: {len(jobs)}",
    ]
    for status, count in counts.items():
        lines.append(f"- {status}: {count}")
    lines.append(f"- completed after a CUDA OOM retry: {len(completed_after_oom)}"
                 " (counted in completed above)")
    lines += ["", "## Phases", "", "| phase | jobs | completed | OOM retries | duration |",
              "|---|---:|---:|---:|---:|"]
    phases: dict[str, list[JobState]] = {}
    for job in jobs:
        phases.setdefault(job.phase, []).append(job)
    for phase, members in phases.items():
        starts = [a.start for j in members for a in j.history if a.start is not None]
        ends = [a.end for j in members for a in j.history if a.end is not None]
        span = (max(ends) - min(starts)) if starts and ends else None
        done = sum(1 for j in members if j.status == JobStatus.COMPLETED)
        retries = sum(oom_retries(j) for j in members)
        duration = format_duration(span, "-")
        lines.append(f"| {phase} | {len(members)} | {done} | {retries} | {duration} |")
    lines += cost_lines(jobs)
    lines += early_stop_lines(jobs)
    needing = [j for j in jobs if j.status in NEEDS_PERSON]
    lines += ["", "## Needs a person", ""]
    if not needing:
        lines.append("Nothing: every job completed." if not any(
            j.status == JobStatus.PRUNED for j in jobs) else "Nothing: every job completed or "
            "was pruned.")
    for job in needing:
        failure = job.failure.cls if job.failure else "-"
        detail = job.failure.detail if job.failure else (job.reason or "")
        where = f"{job.host}:{','.join(map(str, job.gpus))}" if job.host else "-"
        lines += [f"### {job.id} — {job.status}, {failure}", "",
                  f"- phase: {job.phase}; attempts: {job.attempts}; last host: {where}",
                  f"- detail: {detail}", f"- log: {job.log or '-'}"]
        tail = list(log_tails.get(job.id, ()))
        if tail:
            lines += ["", "```", *tail, "```"]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
