"""One source of truth for a job's spec: a job cloned, added or brought in by reload keeps every
per-job key of its phase (stall_after, on_stall, metrics, output_check, mem_mib, priority,
preconditions) in the spec the engine's phases read (the ledger's), and across a restart.
That the phases read only that spec is `test_layers`' rule against `manifest.job_specs`."""

from __future__ import annotations

from pathlib import Path

import pytest

from eq_tui.engine.engine import Engine
from eq_tui.manifest.loader import load_manifest
from eq_tui.manifest.model import MetricsSpec, Precondition
from tests.support.memory_host import MemoryHost

PHASE_KEYS = """\
    stall_after: 8s
    on_stall: kill
    metrics: {jsonl: "out/${JOB_ID}.jsonl"}
    output_check: "out/${JOB_ID}.done"
    mem_mib: 6000
    priority: 3
    preconditions: [{type: checkpoint_exists, path: "ckpt/base.pt"}]
"""
EXPECTED = {
    "stall_after": 8.0, "on_stall": "kill", "metrics": MetricsSpec(jsonl="out/${JOB_ID}.jsonl"),
    "output_check": "out/${JOB_ID}.done", "mem_mib": 6000, "priority": 3,
    "preconditions": (Precondition(type="checkpoint_exists", path="ckpt/base.pt"),),
}


def write(path: Path, jobs: list[str]) -> Path:
    lines = "".join(f"      - {{id: {j}, cmd: \"train {j}\"}}\n" for j in jobs)
    path.write_text("project: keys\nhosts: [{name: m, simulate: {gpus: 2}}]\n"
                    f"phases:\n  - name: main\n{PHASE_KEYS}    jobs:\n{lines}")
    return path


async def engine_for(source: Path, run_dir: Path) -> Engine:
    host = MemoryHost("m", gpus=2)
    engine = Engine(load_manifest(source), run_dir, {"m": host},  # type: ignore[dict-item]
                    clock=lambda: host.now, watch=False)
    await engine.start(preflight=False)
    return engine


@pytest.mark.parametrize("way", ["clone", "add", "reload"])
async def test_a_new_job_keeps_every_per_job_key_of_its_phase(tmp_path: Path, way: str) -> None:
    source = write(tmp_path / "m.yaml", ["j1"])
    engine = await engine_for(source, tmp_path / "run")
    assert {key: getattr(engine.ctx.ledger.specs["j1"], key) for key in EXPECTED} == EXPECTED
    if way == "clone":
        done = await engine.command("clone", ["j1"], {"new_id": "new"})
    elif way == "add":
        done = await engine.command("add", [], {"id": "new", "cmd": "train new",
                                                "phase": "main"})
    else:
        write(source, ["j1", "new"])
        done = await engine.command("reload", [])
    assert done["ok"], done
    spec = engine.ctx.ledger.specs["new"]
    assert {key: getattr(spec, key) for key in EXPECTED} == EXPECTED
    engine.persistence.persist(whole=True)
    engine.ctx.run_dir.release_lock()
    if way != "reload":  # restarted from a file without it: the state file keeps its spec
        write(source, ["j1"])
    again = await engine_for(source, tmp_path / "run")
    spec = again.ctx.ledger.specs["new"]
    assert {key: getattr(spec, key) for key in EXPECTED} == EXPECTED
    again.ctx.run_dir.release_lock()


async def test_an_added_job_names_what_its_phase_could_not_give_it(tmp_path: Path) -> None:
    source = tmp_path / "m.yaml"
    source.write_text("project: keys\nhosts: [{name: m, simulate: {gpus: 2}}]\n"
                      "grid: {lr: [0.1, 0.3]}\noutput_check: \"out/${lr}.done\"\n"
                      "stall_after: 5m\ntemplate: {cmd: \"train --lr ${lr}\"}\n")
    engine = await engine_for(source, tmp_path / "run")
    done = await engine.command("add", [], {"id": "extra", "cmd": "train --lr 1"})
    assert done["ok"] and done["detail"]["left_out"] == ["output_check (uses ${lr})"], done
    spec = engine.ctx.ledger.specs["extra"]
    assert spec.output_check is None and spec.stall_after == 300.0
    given = await engine.command("add", [], {"id": "own", "cmd": "train --lr 2",
                                             "output_check": "out/2.done"})
    assert given["ok"] and given["detail"]["left_out"] == [], given
    engine.ctx.run_dir.release_lock()
