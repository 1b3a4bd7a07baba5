"""Jobs made or changed while the queue runs keep mem_mib, exclusive, gpus_per_job and family:
clone, add, reload, and the specs the state file and events.jsonl keep for them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eq_tui.engine.engine import Engine
from eq_tui.engine.state.job_specs import same_definition, spec_from_json, spec_to_json
from eq_tui.manifest.model import (
    AddedJobDefaults,
    CheckpointSpec,
    JobSpec,
    MetricsSpec,
    PhaseSpec,
    Precondition,
)
from tests.integration.test_ledger import manifest
from tests.support.memory_host import MemoryHost


async def started(tmp_path: Path, jobs: tuple[JobSpec, ...],
                  **top: object) -> tuple[Engine, MemoryHost]:
    host = MemoryHost("m", gpus=2)
    spec = replace(manifest(tmp_path, []), jobs=jobs, **top)  # type: ignore[arg-type]
    engine = Engine(spec, tmp_path / "run", {"m": host},  # type: ignore[dict-item]
                    clock=lambda: host.now, watch=False)
    await engine.start(preflight=False)
    return engine, host


async def restart(tmp_path: Path, engine: Engine, **top: object) -> Engine:
    engine.persistence.persist(whole=True)
    engine.ctx.run_dir.release_lock()
    again, _host = await started(tmp_path, engine.manifest.jobs, **top)
    return again


BIG = JobSpec(id="big", phase="main", cmd="train big", mem_mib=18000, exclusive=True,
              family="main/template", params=(("s", "1"),))


@pytest.mark.parametrize("spec", [
    BIG,
    JobSpec(id="a", phase="p", cmd="x", gpus_per_job=0),
    JobSpec(id="a", phase="p", cmd="x", gpus_per_job=3, mem_mib="auto", priority=2,
            output_check="out/*", preconditions=(Precondition("checkpoint_exists", "c"),),
            metrics=MetricsSpec(jsonl="r.jsonl", log=True), stall_after=90.0,
            on_stall="restart"),
    JobSpec(id="a", phase="p", cmd="x", preempt="force", max_preemptions=0, retry_lost=2,
            checkpoint=CheckpointSpec("c/*.pt", "--resume {checkpoint}", "USR1", 5.0)),
    JobSpec(id="a", phase="p", cmd="x", preempt=True),
])
def test_a_spec_round_trips_through_json(spec: JobSpec) -> None:
    assert spec_from_json(json.loads(json.dumps(spec_to_json(spec)))) == spec


def test_a_spec_recorded_before_these_fields_gets_their_defaults() -> None:
    old = {"id": "a", "phase": "p", "cmd": "x", "gpus_per_job": 2, "priority": 1}
    spec = spec_from_json(old)
    assert (spec.mem_mib, spec.exclusive, spec.family, spec.gpus_per_job) == (None, False, "p",
                                                                             2)


def test_mem_mib_or_exclusive_is_part_of_a_jobs_definition() -> None:
    assert not same_definition(BIG, replace(BIG, mem_mib="auto"))
    assert not same_definition(BIG, replace(BIG, exclusive=False))
    assert not same_definition(BIG, replace(BIG, gpus_per_job=0))
    assert same_definition(BIG, replace(BIG, priority=5))


async def test_a_clone_keeps_its_sources_sharing_and_family_across_a_restart(
        tmp_path: Path) -> None:
    engine, _host = await started(tmp_path, (BIG,))
    assert (await engine.command("clone", ["big"], {"id": "c1"}))["ok"]
    other = await engine.command("clone", ["big"], {"id": "c2", "mem_mib": "auto",
                                                    "exclusive": False})
    assert other["ok"], other
    bad = await engine.command("clone", ["big"], {"id": "c3", "mem_mib": "18GB"})
    assert not bad["ok"] and "whole number of MiB" in str(bad["error"])
    engine = await restart(tmp_path, engine)
    specs = engine.ctx.ledger.specs
    assert (specs["c1"].mem_mib, specs["c1"].exclusive, specs["c1"].family) == (
        18000, True, "main/template")
    assert (specs["c2"].mem_mib, specs["c2"].exclusive, specs["c2"].family) == (
        "auto", False, "main/template")
    assert specs["c1"].params == (("s", "1"),)
    engine.ctx.run_dir.release_lock()


async def test_a_clone_of_a_checkpointed_job_keeps_no_contract_and_says_why(
        tmp_path: Path) -> None:
    saved = replace(BIG, id="ck", checkpoint=CheckpointSpec("ckpt/ck/*.pt",
                                                            "--resume {checkpoint}"))
    engine, _host = await started(tmp_path, (saved,))
    alerts = engine.ctx.bus.subscribe()
    assert (await engine.command("clone", ["ck"], {"id": "ck2"}))["ok"]
    said = [e.message for e in _drain(alerts) if e.type == "alert"]
    assert any(m.startswith("ck2: a clone of ck keeps no checkpoint contract: its command "
                            "saves where ck's does (ckpt/ck/*.pt)") for m in said), said
    engine = await restart(tmp_path, engine)
    specs = engine.ctx.ledger.specs
    assert specs["ck2"].checkpoint is None and specs["ck"].checkpoint is not None
    engine.ctx.run_dir.release_lock()


def _drain(queue: Any) -> list[Any]:
    out = []
    while not queue.empty():
        out.append(queue.get_nowait())
    return out


SHARED_PHASE = (PhaseSpec(name="main", added_jobs=AddedJobDefaults(mem_mib="auto",
                                                                   exclusive=True)),)


async def test_add_takes_sharing_from_its_args_else_its_phase(tmp_path: Path) -> None:
    # the loader fills a phase's added_jobs from its keys and the top level's
    engine, _host = await started(tmp_path, (BIG,), phases=SHARED_PHASE)
    for args in ({"id": "plain"}, {"id": "own", "mem_mib": 4000, "exclusive": False},
                 {"id": "cpu", "gpus_per_job": 0}):
        done = await engine.command("add", [], {"cmd": "t", **args})
        assert done["ok"], done
    for args, why in (({"mem_mib": 0}, "whole number of MiB"),
                      ({"mem_mib": "18GB"}, "whole number of MiB"),
                      ({"mem_mib": True}, "whole number of MiB"),
                      ({"exclusive": "yes"}, "true or false"),
                      ({"gpus_per_job": 0, "mem_mib": 10}, "takes no GPU"),
                      ({"gpus_per_job": 0, "exclusive": True}, "takes no GPU"),
                      ({"gpus_per_job": -1}, "from 0 to 64"),
                      ({"gpus_per_job": True}, "from 0 to 64")):
        refused = await engine.command("add", [], {"id": "bad", "cmd": "t", **args})
        assert not refused["ok"] and why in str(refused["error"]), (args, refused)
    engine = await restart(tmp_path, engine, phases=SHARED_PHASE)
    specs = engine.ctx.ledger.specs
    assert {i: (specs[i].gpus_per_job, specs[i].mem_mib, specs[i].exclusive, specs[i].family)
            for i in ("plain", "own", "cpu")} == {
        "plain": (1, "auto", True, "main"), "own": (1, 4000, False, "main"),
        "cpu": (0, None, False, "main")}
    engine.ctx.run_dir.release_lock()


async def test_a_reload_that_changes_only_mem_mib_or_exclusive_updates_the_job(
        tmp_path: Path) -> None:
    engine, _host = await started(tmp_path, (JobSpec(id="a", phase="main", cmd="train a"),
                                             JobSpec(id="b", phase="main", cmd="train b")))
    await engine.command("hold", ["a", "b"])
    Path(engine.manifest.source).write_text("""
project: p
hosts: [{name: m}]
jobs:
  - {id: a, cmd: train a, mem_mib: 12000}
  - {id: b, cmd: train b, exclusive: true}
""")
    done = await engine.command("reload", [], {"by": "test"})
    assert done["ok"] and done["detail"]["update"] == ["a", "b"], done
    specs = engine.ctx.ledger.specs
    assert (specs["a"].mem_mib, specs["b"].exclusive) == (12000, True)
    assert engine.jobs["a"].cmd == "train a"
    engine.ctx.run_dir.release_lock()


async def test_jobs_made_after_the_state_copy_come_back_from_events_with_their_sharing(
        tmp_path: Path) -> None:
    engine, _host = await started(tmp_path, (BIG,))
    engine.persistence.persist(whole=True)
    state = tmp_path / "run" / "queue_state.json"
    older = state.read_text()
    await engine.command("clone", ["big"], {"id": "c1", "mem_mib": 7000})
    await engine.command("add", [], {"id": "cpu", "cmd": "prep", "gpus_per_job": 0})
    engine.persistence.persist(whole=True)
    engine.ctx.run_dir.release_lock()
    state.write_text(older)  # as if the newer state file were lost
    engine, _host = await started(tmp_path, (BIG,))
    specs = engine.ctx.ledger.specs
    assert (specs["c1"].mem_mib, specs["c1"].exclusive, specs["c1"].family) == (
        7000, True, "main/template")
    assert (specs["cpu"].gpus_per_job, specs["cpu"].family) == (0, "main")
    engine.ctx.run_dir.release_lock()


def test_eq_tui_add_takes_mem_and_exclusive() -> None:
    from eq_tui.api.commands import Add
    from eq_tui.cli.queue_verbs import parse_verb
    from eq_tui.errors import UsageError

    add = parse_verb("add", ["run", "--id", "x", "--gpus", "0", "--", "t"])
    assert add.command.wire() == ("add", [], {"id": "x", "cmd": "t", "gpus_per_job": 0})
    add = parse_verb("add", ["run", "--id", "x", "--mem", "18000", "--exclusive", "--", "t"])
    assert add.command == Add(id="x", cmd="t", mem_mib=18000, exclusive=True)
    assert parse_verb("add", ["run", "--id", "x", "--mem", "auto", "--", "t"]).command == Add(
        id="x", cmd="t", mem_mib="auto")
    for bad in ("18GB", "0", "-1", "AUTO"):
        with pytest.raises(UsageError, match="whole number of MiB"):
            parse_verb("add", ["run", "--id", "x", "--mem", bad, "--", "t"])


async def test_add_takes_preempt_from_its_args_else_its_phase(tmp_path: Path) -> None:
    phases = (PhaseSpec(name="main", added_jobs=AddedJobDefaults(preempt=True,
                                                                 max_preemptions=1)),)
    engine, _host = await started(tmp_path, (BIG,), phases=phases)
    for args in ({"id": "inherits"}, {"id": "forced", "preempt": "force"},
                 {"id": "never", "preempt": False}):
        done = await engine.command("add", [], {"cmd": "t", **args})
        assert done["ok"], done
    refused = await engine.command("add", [], {"id": "bad", "cmd": "t", "preempt": "yes"})
    assert not refused["ok"] and "true, false or force" in str(refused["error"]), refused
    engine = await restart(tmp_path, engine, phases=phases)
    specs = engine.ctx.ledger.specs
    assert {i: (specs[i].preempt, specs[i].max_preemptions)
            for i in ("inherits", "forced", "never")} == {
        "inherits": (True, 1), "forced": ("force", 1), "never": (False, 1)}
    engine.ctx.run_dir.release_lock()


def test_eq_tui_add_takes_preempt() -> None:
    from eq_tui.api.commands import Add
    from eq_tui.cli.queue_verbs import parse_verb
    from eq_tui.errors import UsageError

    assert parse_verb("add", ["run", "--id", "x", "--preempt", "--", "t"]).command == Add(
        id="x", cmd="t", preempt=True)
    assert parse_verb("add", ["run", "--id", "x", "--preempt", "force", "--", "t"]).command \
        == Add(id="x", cmd="t", preempt="force")
    assert "preempt" not in parse_verb("add", ["run", "--id", "x", "--", "t"]).command.wire()[2]
    with pytest.raises(UsageError, match="nothing or force"):
        parse_verb("add", ["run", "--id", "x", "--preempt", "always", "--", "t"])
