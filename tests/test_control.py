"""The control socket protocol against a real engine on a simulated host."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest

from eq_tui.engine.control import ControlClient, find_socket
from eq_tui.engine.events import JobUpdated
from tests.support.engine_run import job, make_manifest, start_engine

pytestmark = pytest.mark.integration
LONG_JOB = "fake-train --epochs 200 --epoch-seconds 0.2 --mem 1000"


async def _raw(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_unix_connection(str(path))


async def _read_json(reader: asyncio.StreamReader) -> dict[str, object]:
    data: dict[str, object] = json.loads(await asyncio.wait_for(reader.readline(), 10))
    return data


async def test_snapshot_events_commands_two_clients_and_bad_requests(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("long", LONG_JOB), job("other", LONG_JOB)])
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        socket = find_socket(tmp_path / "run")
        assert socket is not None and socket.exists()
        assert stat.S_IMODE(socket.stat().st_mode) == 0o600
        first = await ControlClient.connect(tmp_path / "run")
        second = await ControlClient.connect(tmp_path / "run")
        assert first.project == "t" and {j["id"] for j in first.snapshot()["jobs"]} == {
            "long", "other"}
        events = first.subscribe()
        await run.wait_for(lambda: "epoch" in run.engine.jobs["long"].last_line)
        result = await second.command("kill", ["long"])
        assert result["ok"], result
        # the first client sees the change as events and in its local snapshot
        while True:
            event = await asyncio.wait_for(events.get(), 10)
            if isinstance(event, JobUpdated) and event.job == "long" and \
                    event.state["status"] == "killed":
                break
        assert next(j for j in first.snapshot()["jobs"] if j["id"] == "long")["status"] == \
            "killed"
        # the command took effect once
        assert sum(1 for e in run.events if getattr(e, "new", None) == "killed") == 1
        lines = await first.tail("long")
        assert any("epoch" in line or "GPU" in line for line in lines)
        # malformed requests: an error reply, the connection and the engine stay up
        reader, writer = await _raw(socket)
        for bad in (b"not json\n", b"[1, 2]\n", b'{"op": "nope", "id": 7}\n',
                    b'{"op": "command", "id": 8, "name": "kill", "jobs": "long"}\n'):
            writer.write(bad)
            await writer.drain()
            reply = await _read_json(reader)
            assert reply["type"] == "error"
        writer.write(b'{"op": "snapshot", "id": 9}\n')
        await writer.drain()
        assert (await _read_json(reader))["id"] == 9
        # a client that disconnects mid-stream does not disturb the others
        writer.close()
        await first.close()
        assert (await second.command("kill", ["other"]))["ok"]
        await second.close()
    finally:
        await run.stop()
    assert find_socket(tmp_path / "run") is None
