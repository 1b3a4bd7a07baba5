"""An attached client whose link to the engine drops: it reconnects with a growing pause, says
so, catches up from a fresh snapshot, and a command whose answer was lost is sent again and
applied once (the sim's run records say what ran)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from eq_tui.api.control_client import ControlClient, find_socket
from eq_tui.api.events import Alert, Event, JobUpdated
from eq_tui.api.reconnecting import ReconnectingClient, Streams
from eq_tui.cli.attach import local_connector
from tests.support.cut_link import CutLink
from tests.support.engine_run import job, make_manifest, sim_hosts, start_engine

pytestmark = pytest.mark.integration
LONG_JOB = "fake-train --epochs 300 --epoch-seconds 0.2 --mem 1000"
PAUSES = (0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)


async def next_matching(queue: asyncio.Queue[Event], predicate: object) -> Event:
    while True:
        event = await asyncio.wait_for(queue.get(), 30)
        if predicate(event):  # type: ignore[operator]
            return event


async def test_a_client_reconnects_catches_up_and_a_lost_answer_is_applied_once(
        tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("long1", LONG_JOB), job("w1")],
                             hosts=sim_hosts(("sim", 1)))
    run_dir = tmp_path / "run"
    run = await start_engine(manifest, run_dir, exit_when_done=False)
    socket = find_socket(run_dir)
    assert socket is not None
    link = CutLink(socket, tmp_path / "relay.sock")
    await link.up()

    async def through_link() -> Streams | None:
        return await asyncio.open_unix_connection(str(link.path), limit=1 << 26)

    client = await ReconnectingClient.open(through_link, where="relay", pauses=PAUSES)
    assert client is not None
    events = client.subscribe()
    direct = await ControlClient.connect(run_dir)
    try:
        await run.wait_for(lambda: "epoch" in run.engine.jobs["long1"].last_line)
        await link.down()
        lost = await next_matching(events, lambda e: isinstance(e, Alert) and "reconnecting"
                                   in e.message)
        assert abs(lost.at - time.time()) < 60  # the wall clock, as the engine's alerts
        assert lost.level == "warning"
        # while the link is down, the queue moves on
        assert (await direct.command("kill", ["long1"]))["ok"]
        await run.wait_for(lambda: run.status("w1") == "completed")
        await link.up()
        caught = await next_matching(events, lambda e: isinstance(e, JobUpdated)
                                     and e.job == "w1" and e.state["status"] == "completed")
        assert caught.state["attempts"] == 1
        await next_matching(events, lambda e: isinstance(e, Alert) and "caught up" in e.message)
        jobs = {j["id"]: j["status"] for j in client.snapshot()["jobs"]}
        assert jobs == {"long1": "killed", "w1": "completed"}
        # a command reaches the engine, its answer is lost; sent again with its id: once
        link.cut_after_command()
        answer = await client.command("clone", ["w1"], {"id": "w1c"})
        assert answer["ok"] and answer.get("duplicate") and link.commands_let_through == 1
        assert client.reconnects == 2
        await run.wait_for(lambda: run.status("w1c") == "completed")
        # the engine stops: the client says it is gone instead of trying forever
        closed = asyncio.create_task(client.wait_closed())
        await run.stop()
        await asyncio.wait_for(closed, 30)
    finally:
        await client.close()
        await direct.close()
        await link.down()
        await run.stop()
    started = [e["job"] for e in run.runs() if e.get("event") == "start"]
    assert sorted(started) == ["long1", "w1", "w1c"]


async def test_local_connector_finds_no_engine_once_it_stopped(tmp_path: Path) -> None:
    run = await start_engine(make_manifest(tmp_path, [job("a")]), tmp_path / "run",
                             exit_when_done=False)
    connect = local_connector(tmp_path / "run")
    try:
        streams = await connect()
        assert streams is not None
        streams[1].close()
    finally:
        await run.stop()
    assert await connect() is None
