"""Notifications on real screen sessions with simulated GPUs, to a local HTTP receiver on
127.0.0.1 and to a command: coalesced bursts, phase_done and finished once each, a failing
target retried with the same message id and turned into an alert, and delivery that survives
an engine restart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from eq_tui.cli.main import main
from eq_tui.manifest.model import CrashGuard, NotifySpec, OomRetry
from eq_tui.notify import notifier
from eq_tui.notify.notifier import COALESCE_S
from eq_tui.notify.outbox import OUTBOX
from tests.support.engine_run import job, make_manifest, sim_hosts, start_engine
from tests.support.receiver import Receiver

pytestmark = pytest.mark.integration
FAST = "fake-train --epochs 1 --epoch-seconds 0.1 --mem 1000"
BAD = f"{FAST} --exit-code 3"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


def stuck_jobs(messages: list[dict]) -> list[str]:  # type: ignore[type-arg]
    return [e["job"] for m in messages for e in m["events"]
            if e["kind"] == "stuck" and "job" in e]  # a held phase's note names no job


async def test_a_burst_of_stuck_jobs_is_one_message_then_one_digest_and_the_end_once(
        tmp_path: Path, receiver: Receiver) -> None:
    out = tmp_path / "finished.json"
    jobs = [job("good", FAST)] + [job(f"bad{i}", BAD) for i in range(5)]
    # five jobs failing alike would trip the crash guard (a phase note, not five job notes)
    manifest = make_manifest(tmp_path, jobs, hosts=sim_hosts(("sim", 6)),
                             crash_guard=CrashGuard(enabled=False),
                             oom_retry=OomRetry(delay=0.3, max_attempts=1),
                             notify=(NotifySpec(on=("stuck", "phase_done", "finished"),
                                                url=receiver.url),
                                     NotifySpec(on=("finished",), command=f"cat > {out}")))
    run = await start_engine(manifest, tmp_path / "run")
    assert run.task is not None
    assert await run.task == 1  # the queue finished; close() let the owed messages go
    messages = receiver.received()
    assert sorted(stuck_jobs(messages)) == [f"bad{i}" for i in range(5)]  # each exactly once
    assert len(messages) <= 3  # 5 stuck + phase + end in at most 3 messages (coalesced)
    digest = next(m for m in messages if m["count"] > 1)
    assert "more jobs stuck" in digest["text"] or "more job stuck" in digest["text"]
    gaps = [b - a for a, b in zip(receiver.times, receiver.times[1:], strict=False)]
    assert all(gap >= COALESCE_S * 0.95 for gap in gaps)  # at most one per 10 s
    kinds = [e["kind"] for m in messages for e in m["events"]]
    assert kinds.count("phase_done") == 1 and kinds.count("finished") == 1
    first = next(m for m in messages if "bad" in m["text"])
    assert "exit_nonzero" in first["text"] and "exit 3" in first["text"]
    assert "ValueError: loss is nan" in first["text"]  # the last log lines
    assert all(m["id"] and m["text"] for m in messages)
    sent = json.loads(out.read_text())
    assert sent["kind"] == "finished" and "queue finished (exit 1)" in sent["text"]


async def test_a_failing_target_is_retried_with_the_same_id_and_becomes_an_alert(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # shorter waits between the tries (2 s, then 5 s, each after the 10 s that coalesces a
    # burst): what is sent again, and what is said, do not depend on them
    monkeypatch.setattr(notifier, "COALESCE_S", 0.5)
    monkeypatch.setattr(notifier, "BACKOFF_S", (0.2, 0.5, 15.0, 60.0, 300.0))
    receiver = Receiver(fail_first=2)
    try:
        manifest = make_manifest(tmp_path, [job("bad", BAD)],
                                 oom_retry=OomRetry(delay=0.3, max_attempts=1),
                                 notify=(NotifySpec(on=("stuck",), url=receiver.url),))
        run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
        try:
            await run.wait_for(lambda: bool(receiver.received()), timeout=60)
            assert run.status("bad") == "stuck"  # the queue never waited on the target
            delivered = receiver.received()[0]
            assert [m["id"] for m in receiver.failed] == [delivered["id"]] * 2
            alerts = [a["message"] for a in run.engine.ctx.bus.alerts]
            assert any("notification to url" in a and "HTTP 500" in a for a in alerts)
        finally:
            await run.stop()
    finally:
        receiver.close()


async def test_owed_messages_survive_an_engine_restart_and_none_is_doubled(
        tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = make_manifest(tmp_path, [job("bad", BAD), job("good", FAST)],
                             oom_retry=OomRetry(delay=0.3, max_attempts=1),
                             notify=(NotifySpec(on=("stuck", "finished"),
                                                url_env="EQ_TEST_HOOK"),))
    monkeypatch.setenv("EQ_TEST_HOOK", "http://127.0.0.1:9/nothing-listens")
    first = await start_engine(manifest, tmp_path / "run")
    assert first.notifier is not None
    first.notifier.flush_s = 0.5
    assert first.task is not None
    assert await first.task == 1
    alerts = [a["message"] for a in first.engine.ctx.bus.alerts]
    assert any("notification to url $EQ_TEST_HOOK failed" in a for a in alerts)
    assert not any("127.0.0.1:9" in a for a in alerts)  # the URL is the environment's
    owed = (tmp_path / "run" / OUTBOX).read_text()
    assert '"stuck:bad:1"' in owed and '"finished"' in owed
    monkeypatch.setenv("EQ_TEST_HOOK", receiver.url)
    # a short coalescing wait: a message sent twice goes out at once, well inside close()'s wait
    monkeypatch.setattr(notifier, "COALESCE_S", 0.5)
    second = await start_engine(manifest, tmp_path / "run")
    assert second.task is not None
    assert await second.task == 1
    messages = receiver.received()
    ids = [e["id"] for m in messages for e in m["events"]]
    assert sorted(ids) == ["finished", "stuck:bad:1"]  # each once, across the restart


def test_notify_test_sends_one_message_to_every_target(tmp_path: Path, receiver: Receiver,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    out = tmp_path / "got.json"
    manifest = tmp_path / "m.yaml"
    manifest.write_text(f"project: p\njobs: [{{id: j, cmd: x}}]\nnotify:\n"
                        f"  - {{on: [stuck], url: '{receiver.url}'}}\n"
                        f"  - {{on: [finished], command: 'cat > {out}'}}\n")
    assert main(["notify-test", str(manifest)]) == 0
    assert [m["kind"] for m in receiver.received()] == ["test"]
    assert "test notification" in json.loads(out.read_text())["text"]
    manifest.write_text("project: p\njobs: [{id: j, cmd: x}]\nnotify:\n"
                        "  - {on: [stuck], command: 'exit 4'}\n")
    assert main(["notify-test", str(manifest)]) == 1
    assert "FAILED: exited 4" in capsys.readouterr().out
