"""`eq-tui drain` / `undrain` (issue 44 item 4): the verbs' parsing and checks, and the engine's
cordon on in-memory hosts with a fixed clock — nothing launches on a drained host or GPU, the
waiting reason says "drained", `--now` requeues the jobs there (no retry spent), the drain is in
the state file and a restarted engine keeps it, `undrain` gives the host back. On real sshd
hosts: tests/integration/test_drain_hosts.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from eq_tui.api.commands import Drain, Undrain, from_wire
from eq_tui.api.events import HostDrained
from eq_tui.api.model import FailureClass, JobStatus
from eq_tui.cli.queue_check import check_host
from eq_tui.cli.queue_verbs import parse_verb
from eq_tui.engine.engine import Engine
from eq_tui.errors import UsageError
from eq_tui.hosts.base import LaunchRequest
from eq_tui.manifest.model import HostSpec, JobSpec, Manifest
from tests.integration.test_ledger import drain as take_events
from tests.support.memory_host import MemoryHost

# ---- the verbs --------------------------------------------------------------------------------


def test_drain_parses_host_gpus_now_and_grace() -> None:
    request = parse_verb("drain", ["run", "box1", "--gpus", "1,0", "--now", "--grace", "2m"])
    assert request.command == Drain(host="box1", only_gpus=(0, 1), now=True, grace=120.0)
    assert request.jobs == []  # a host, not a job id: never checked against the jobs
    assert parse_verb("drain", ["run", "box1"]).command == Drain(host="box1")
    assert parse_verb("undrain", ["run", "box1"]).command == Undrain(host="box1")


@pytest.mark.parametrize("argv, words", [
    (["run", "box1", "--gpus", "0,x"], "--gpus takes GPU indexes"),
    (["run", "box1", "--gpus", ""], "--gpus takes GPU indexes"),
    (["run", "box1", "--grace", "5s"], "--grace goes with --now"),
    (["run", "box1", "--now", "--grace", "soon"], "drain: --grace takes a duration"),
])
def test_bad_drain_arguments_are_usage_errors(argv: list[str], words: str) -> None:
    with pytest.raises(UsageError, match=words):
        parse_verb("drain", argv)


def test_a_host_or_gpu_the_run_lacks_is_a_usage_error_before_sending() -> None:
    hosts = [{"name": "box1", "gpus": [{"index": 0}, {"index": 1}]}, {"name": "box2"}]
    with pytest.raises(UsageError, match=r"no host 'bux1'.*did you mean 'box1'"):
        check_host(parse_verb("drain", ["run", "bux1"]), hosts)
    with pytest.raises(UsageError, match="no host 'nope'"):
        check_host(parse_verb("undrain", ["run", "nope"]), hosts)
    with pytest.raises(UsageError, match="box1 has no GPU 2 of ours"):
        check_host(parse_verb("drain", ["run", "box1", "--gpus", "1,2"]), hosts)
    check_host(parse_verb("drain", ["run", "box1", "--gpus", "1"]), hosts)
    check_host(parse_verb("drain", ["run", "box2", "--gpus", "5"]), hosts)  # GPUs not known


def test_drain_travels_the_wire_as_it_was_given() -> None:
    command = Drain(host="b", only_gpus=(1,), now=True, grace=3.0, by="me")
    assert from_wire(*command.wire()) == command
    assert from_wire("undrain", ["b"]) == Undrain(host="b")


# ---- the engine -------------------------------------------------------------------------------


def manifest(tmp: Path, ids: list[str]) -> Manifest:
    source = tmp / "m.yaml"
    source.touch()
    return Manifest(project="p", source=str(source),
                    hosts=(HostSpec(name="a"), HostSpec(name="b")),
                    jobs=tuple(JobSpec(id=i, phase="main", cmd=f"train {i}") for i in ids))


async def started(tmp: Path, ids: list[str], hosts: dict[str, MemoryHost] | None = None
                  ) -> tuple[Engine, dict[str, MemoryHost]]:
    hosts = hosts or {"a": MemoryHost("a", gpus=2), "b": MemoryHost("b", gpus=2)}
    clock = hosts["a"]
    hosts["b"].now = clock.now
    engine = Engine(manifest(tmp, ids), tmp / "run", hosts,  # type: ignore[arg-type]
                    clock=lambda: clock.now, watch=False)
    await engine.start(preflight=False)
    return engine, hosts


def placed(hosts: dict[str, MemoryHost]) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
    return {job: [(name, r.gpus) for name, host in hosts.items() for r in host.launches
                  if r.job_id == job]
            for job in sorted({r.job_id for h in hosts.values() for r in h.launches})}


async def test_a_drained_host_takes_no_launch_and_the_reason_says_drained(
        tmp_path: Path) -> None:
    engine, hosts = await started(tmp_path, ["j1", "j2", "j3", "j4", "j5", "j6"])
    events = engine.subscribe()
    answer = await engine.command("drain", ["a"])
    assert answer["ok"], answer
    await engine.tick()
    assert len(hosts["a"].launches) == 0 and len(hosts["b"].launches) == 2
    waiting = engine.snapshot()["waiting_reason"]
    assert "a drained" in waiting and "quarantined" not in waiting
    assert {gpu["index"] for gpu in engine.snapshot()["hosts"][0]["gpus"]
            if gpu.get("drained")} == {0, 1}
    drained = [e for e in take_events(events) if isinstance(e, HostDrained)]
    assert [(e.host, e.drained, e.gpus) for e in drained] == [("a", True, ())]
    assert (await engine.command("undrain", ["a"]))["ok"]
    await engine.tick()
    assert len(hosts["a"].launches) == 2
    engine.ctx.run_dir.release_lock()


async def test_drained_gpus_only_keep_the_others_of_the_host_in_use(tmp_path: Path) -> None:
    engine, hosts = await started(tmp_path, ["j1", "j2", "j3", "j4", "j5"])
    await engine.tick()  # the first probe: the GPUs are known
    await engine.command("drain", ["a"], {"only_gpus": [1]})
    for job in engine.jobs.values():  # back to the queue, so the next tick places them again
        if job.status.is_active:
            await engine.command("requeue", [job.id])
    hosts["a"].launches.clear()
    await engine.tick()
    assert [r.gpus for r in hosts["a"].launches] == [(0,)]
    engine.ctx.run_dir.release_lock()


async def test_an_unknown_host_or_gpu_is_refused_by_the_engine(tmp_path: Path) -> None:
    engine, _ = await started(tmp_path, ["j1"])
    await engine.tick()
    missing = await engine.command("drain", ["c"])
    assert not missing["ok"] and "no host 'c'" in str(missing["error"])
    gpu = await engine.command("drain", ["a"], {"only_gpus": [7]})
    assert not gpu["ok"] and "a has no GPU 7 of ours" in str(gpu["error"])
    assert engine.ctx.hosts["a"].cordon is None
    assert (await engine.command("undrain", ["a"]))["results"] == {"a": "not drained"}
    engine.ctx.run_dir.release_lock()


async def test_drain_now_requeues_the_jobs_there_without_spending_a_retry(
        tmp_path: Path) -> None:
    engine, hosts = await started(tmp_path, ["j1", "j2", "j3", "j4"])
    await engine.tick()
    on_a = sorted(j.id for j in engine.jobs.values() if j.host == "a")
    assert len(on_a) == 2
    answer = await engine.command("drain", ["a"], {"now": True, "grace": 0})
    assert answer["ok"] and sorted(answer["detail"]["stopped"]) == on_a, answer
    assert [s for s in hosts["a"].sessions.values() if s.alive] == []
    for job_id in on_a:
        job = engine.jobs[job_id]
        assert job.status == JobStatus.PENDING and job.failure is None
        assert job.history[-1].failure_class == FailureClass.REQUEUED
        assert "a drained" in str(job.reason)
    for job in engine.jobs.values():
        if job.host == "b":
            hosts["b"].finish(job.id, 0)
    await engine.tick()
    assert sorted(j.id for j in engine.jobs.values()
                  if j.status.is_active and j.host == "b") == on_a
    engine.ctx.run_dir.release_lock()


async def test_a_restarted_engine_keeps_the_drain(tmp_path: Path) -> None:
    engine, hosts = await started(tmp_path, ["j1", "j2", "j3"])
    await engine.command("drain", ["a"], {"only_gpus": [0]})
    state = json.loads((tmp_path / "run" / "queue_state.json").read_text())
    assert state["drained"] == {"a": [0]}
    await engine.stop()
    engine.ctx.run_dir.release_lock()
    again, _ = await started(tmp_path, ["j1", "j2", "j3"], hosts)
    assert again.ctx.hosts["a"].cordon == frozenset({0})
    await again.command("undrain", ["a"])
    state = json.loads((tmp_path / "run" / "queue_state.json").read_text())
    assert state["drained"] == {}
    again.ctx.run_dir.release_lock()


class GatedHost(MemoryHost):
    """A host whose sessions start only when the test opens the gate: a launch under way."""

    def __init__(self, name: str, gpus: int) -> None:
        super().__init__(name, gpus=gpus)
        self.gate = asyncio.Event()

    async def launch(self, request: LaunchRequest) -> None:
        await self.gate.wait()
        await super().launch(request)


async def test_drain_answers_only_once_the_launches_under_way_there_have_started(
        tmp_path: Path) -> None:
    gated = GatedHost("a", gpus=2)
    engine, _ = await started(tmp_path, ["j1", "j2", "j3"],
                              {"a": gated, "b": MemoryHost("b", gpus=0)})
    await engine.tick(background_launches=True)  # j1, j2 decided for a; their sessions wait
    drain = asyncio.create_task(engine.command("drain", ["a"]))
    for _ in range(200):  # the drain runs as far as it can while the launches are held up
        await asyncio.sleep(0)
    assert engine.ctx.hosts["a"].cordon == "all" and not drain.done()
    gated.gate.set()
    assert (await drain)["ok"]
    assert sorted(r.job_id for r in gated.launches) == ["j1", "j2"]  # started before the answer
    await engine.tick()
    assert len(gated.launches) == 2
    engine.ctx.run_dir.release_lock()
