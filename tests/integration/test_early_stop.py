"""Early stopping on the simulator: real sessions, fake-train's known learning curves (--lr: the
quality peaks at 0.03), proved from the hosts' own run records (ground_truth.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eq_tui.api.commands import Retry
from eq_tui.api.events import JobPruned
from eq_tui.hosts.factory import sim_state_dir
from eq_tui.manifest.model import EarlyStopSpec, JobSpec, PhaseSpec, ResultsSpec
from eq_tui.results.group import group
from eq_tui.results.records import read_records
from tests.support.engine_run import job, make_manifest, run_to_end, sim_hosts, start_engine
from tests.support.ground_truth import exits, gpu_seconds

pytestmark = pytest.mark.asyncio

LRS = ("0.0003", "0.001", "0.003", "0.01", "0.03", "0.1", "0.3", "1", "3")
EPOCH_S = 0.6


def sweep(lrs: tuple[str, ...] = LRS, seeds: tuple[int, ...] = (1, 2), epochs: int = 9,
          epoch_s: float = EPOCH_S) -> list[JobSpec]:
    return [job(f"lr{lr}_s{seed}",
                f"fake-train --lr {lr} --seed {seed} --epochs {epochs} "
                f"--epoch-seconds {epoch_s} --mem 2000",
                params=(("lr", lr), ("seed", str(seed))))
            for lr in lrs for seed in seeds]


def early_phase(**kwargs: object) -> tuple[PhaseSpec, ...]:
    spec = EarlyStopSpec(metric="val_acc", goal="max", **kwargs)  # type: ignore[arg-type]
    return (PhaseSpec(name="main", results=ResultsSpec(goal=(("val_acc", "max"),),
                                                       early_stop=spec)),)


async def test_asha_sweep_saves_gpu_time_and_keeps_the_best(tmp_path: Path) -> None:
    """9 learning rates x 2 seeds, 9 epochs, 3 GPUs: asha (eta 3, grace 1) stops the losers;
    the best lr's jobs both complete, the queue exits 0, the sweep costs at most 60 % of
    training every job to the end (each job's full cost: a completed job's, as recorded)."""
    manifest = make_manifest(tmp_path, sweep(), hosts=sim_hosts(("sim", 3)),
                             phases=early_phase())
    run_dir = tmp_path / "run"
    code, run = await run_to_end(manifest, run_dir, timeout=120)
    assert code == 0
    statuses = {j.id: str(j.status) for j in run.engine.jobs.values()}
    assert statuses["lr0.03_s1"] == statuses["lr0.03_s2"] == "completed", statuses
    pruned = [k for k, v in statuses.items() if v == "pruned"]
    assert len(pruned) >= 6, statuses
    assert set(statuses.values()) <= {"completed", "pruned"}
    used = gpu_seconds([sim_state_dir(run_dir, "sim")])
    assert set(used) == set(statuses)
    full = max(used[k] for k, v in statuses.items() if v == "completed")
    print(f"GPU-s used {sum(used.values()):.1f} of {full * len(statuses):.1f}; pruned "
          f"{len(pruned)}: {sorted(pruned)}")
    assert sum(used.values()) <= 0.6 * full * len(statuses), (sum(used.values()), full)
    # every pruned job says why, in the record, an event and the history
    for key in pruned:
        reason = run.engine.jobs[key].reason or ""
        assert reason.startswith("pruned at report "), reason
        assert "val_acc" in reason and "rung cutoff" in reason
    assert not [e for e in run.events if e.type == "phase_held"]  # the crash guard: no count
    events = [e for e in run.events if isinstance(e, JobPruned)]
    assert sorted(e.job for e in events) == sorted(pruned)
    history = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert sorted(e["job"] for e in history if e["type"] == "job_pruned") == sorted(pruned)
    # a pruned job is no failure: no failure class, one attempt, its last numbers kept
    for key in pruned:
        record = run.job(key)
        assert record["failure"] is None and record["attempts"] == 1
        assert record["metrics"].get("val_acc") is not None
    # the results table still marks lr 0.03 best (over the completed jobs)
    table = group(read_records(run_dir) or [], group_over="seed", goals={"val_acc": "max"})
    best = [row.params for row in table.rows if "val_acc" in row.best]
    assert best == [{"lr": "0.03"}]
    pruned_rows = {row.params["lr"]: table.pruned(row) for row in table.rows}
    last = {s: run.job(f"lr3_s{s}")["metrics"]["val_acc"] for s in (1, 2)}
    assert pruned_rows["3"] == [f"seed={s} (val_acc {last[s]:.4g})" for s in (1, 2)]
    assert all(not table.missing(row) for row in table.rows)
    summary = (run_dir / "summary.md").read_text()
    assert f"- pruned: {len(pruned)} jobs" in summary and "GPU-hours saved: about" in summary


async def test_without_early_stop_nothing_is_followed(tmp_path: Path) -> None:
    """The healthy path pays nothing: no early_stop, no log followed, nothing pruned."""
    manifest = make_manifest(tmp_path, sweep(LRS[3:6], (1,), epochs=2, epoch_s=0.1),
                             hosts=sim_hosts(("sim", 3)))
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 0
    assert run.engine.observation.request("sim").follow == ()
    assert all(not j.reports for j in run.engine.jobs.values())
    assert not any(isinstance(e, JobPruned) for e in run.events)


async def test_retry_of_a_pruned_job_runs_it_to_the_end(tmp_path: Path) -> None:
    """A person's retry of a pruned job: it launches again and early stopping leaves it be,
    though it is as bad as before."""
    manifest = make_manifest(tmp_path, sweep(("0.03", "3"), (1,), epochs=5, epoch_s=0.4),
                             hosts=sim_hosts(("sim", 1)), phases=early_phase())
    run_dir = tmp_path / "run"
    code, run = await run_to_end(manifest, run_dir, timeout=60)
    assert code == 0
    assert str(run.engine.jobs["lr3_s1"].status) == "pruned"
    again = await start_engine(manifest, run_dir, exit_when_done=False)
    try:
        result = await again.engine.send(Retry(job_ids=("lr3_s1",)))
        assert result["ok"], result
        await again.wait_for(lambda: again.status("lr3_s1") == "completed", timeout=30)
    finally:
        await again.stop()
    assert again.engine.jobs["lr3_s1"].attempts == 2
    first, second = exits([sim_state_dir(run_dir, "sim")])["lr3_s1"]
    assert first in (129, 143) and second == 0


async def test_packed_jobs_and_an_oom_retry_compose_with_pruning(tmp_path: Path) -> None:
    """Four jobs packed onto one GPU by memory: the losers are stopped, their neighbours on
    the card go on to the end; a job whose first attempt hit a CUDA OOM is judged on its
    second attempt's reports only."""
    specs = sweep(("0.03", "0.01", "1", "3"), (1,), epochs=6, epoch_s=0.5)
    specs = [s.__class__(**{**s.__dict__, "mem_mib": 3000,
                            "cmd": s.cmd + (" --oom-attempts 1" if s.id == "lr1_s1" else "")})
             for s in specs]
    manifest = make_manifest(tmp_path, specs, hosts=sim_hosts(("sim", 1)),
                             phases=early_phase())
    run_dir = tmp_path / "run"
    code, run = await run_to_end(manifest, run_dir, timeout=90)
    assert code == 0
    jobs = run.engine.jobs
    assert str(jobs["lr0.03_s1"].status) == "completed"
    assert str(jobs["lr3_s1"].status) == "pruned"
    oom = jobs["lr1_s1"]
    assert oom.attempts == 2 and oom.reports_attempt == 2
    assert oom.reports == printed_values(oom.log or "")[:len(oom.reports)]
    ended = exits([sim_state_dir(run_dir, "sim")])
    assert ended["lr0.03_s1"] == [0]  # its neighbours' stops left it alone
    for key in ("lr0.01_s1", "lr3_s1"):
        if str(jobs[key].status) == "completed":
            assert ended[key] == [0], key
        else:  # stopped by a signal (TERM, or the session's HUP)
            assert len(ended[key]) == 1 and ended[key][0] in (129, 143), (key, ended[key])


def printed_values(log: str) -> list[float]:
    return [float(x) for x in re.findall(r"val_acc=([0-9.]+)", Path(log).read_text())]
