"""The control socket protocol against a real engine on a simulated host."""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import stat
from pathlib import Path

import pytest

from eq_tui.api.control_client import ControlClient, find_socket
from eq_tui.api.events import JobUpdated
from eq_tui.api.model import JobStatus
from eq_tui.manifest.model import EnvVar
from tests.support.engine_run import job, make_manifest, start_engine
from tests.support.secret_search import files_holding

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


async def test_secrets_handed_to_a_running_engine_launch_its_waiting_jobs(
        tmp_path: Path) -> None:
    value = f"ctl-{secrets.token_hex(8)}"
    cmd = 'printf %s "$TOKEN" | sha256sum | cut -c1-64 > got.sha'
    manifest = make_manifest(
        tmp_path, [job("uses_it", cmd, output_check="got.sha")], cwd=str(tmp_path),
        env={"PLAIN": EnvVar("visible"), "INLINE": EnvVar("in-file", secret=True),
             "TOKEN": EnvVar("", secret=True, from_env="EQ_CTL_TOKEN", provided=False)})
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        await run.wait_for(lambda: run.engine.jobs["uses_it"].reason ==
                           "secret TOKEN not provided")
        client = await ControlClient.connect(tmp_path / "run")
        asked = await client.provide_secrets({}, "t")
        assert asked == {"given": [], "refused": {}, "missing": ["TOKEN"], "error": None}
        wrong = await client.provide_secrets({"TOKEN": value}, "other")
        assert wrong["error"] == "this engine runs project 't', not 'other'; nothing taken"
        assert wrong["given"] == [] and wrong["missing"] == ["TOKEN"]
        assert run.engine.jobs["uses_it"].status == JobStatus.PENDING
        answer = await client.provide_secrets(
            {"TOKEN": value, "PLAIN": "x", "INLINE": "x", "NOPE": "x"}, "t")
        assert answer["given"] == ["TOKEN"] and answer["missing"] == [] and \
            answer["error"] is None
        assert answer["refused"] == {
            "PLAIN": "project 't' declares no secret PLAIN",
            "INLINE": "already provided: the engine keeps the value it has (stop it and "
                      "resume it to change that)",
            "NOPE": "project 't' declares no secret NOPE"}
        again = await client.provide_secrets({"TOKEN": "other"}, "t")
        assert again["given"] == [] and "already provided" in again["refused"]["TOKEN"]
        await run.wait_for(lambda: run.engine.jobs["uses_it"].status == JobStatus.COMPLETED)
        got = (tmp_path / "got.sha").read_text().strip()
        assert got == hashlib.sha256(value.encode()).hexdigest()  # not "other"
        bad = await _raw(find_socket(tmp_path / "run") or tmp_path)
        bad[1].write(b'{"op": "secrets", "id": 3, "project": "t", "values": {"A": 1}}\n')
        await bad[1].drain()
        assert (await _read_json(bad[0]))["error"] == "values must map names to strings"
        bad[1].close()
        await client.close()
    finally:
        await run.stop()
    assert files_holding(tmp_path / "run", value.encode()) == []
    assert any("secrets handed over the control socket: TOKEN" in line
               for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines())


async def test_attach_resume_says_which_secrets_it_handed_over_and_which_are_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from eq_tui.cli.attach import hand_over_secrets

    value = f"ctl-{secrets.token_hex(8)}"
    manifest = make_manifest(
        tmp_path, [job("uses_it", LONG_JOB)],
        env={"TOKEN": EnvVar("", secret=True, from_env="EQ_CTL_TOKEN", provided=False),
             "KEY": EnvVar("", secret=True, from_file="key.txt", provided=False)})
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    try:
        client = await ControlClient.connect(tmp_path / "run")
        saved = json.loads((tmp_path / "run" / "manifest.json").read_text())
        monkeypatch.setenv("EQ_CTL_TOKEN", value)
        await hand_over_secrets(client, saved, where="RUN", relative_to=str(tmp_path))
        said = capsys.readouterr().err.splitlines()
        assert said == [
            "eq-tui: handed the engine of RUN the secrets it lacked: TOKEN (over its control "
            "socket, into its memory only)",
            f"eq-tui: the engine of RUN still lacks secret KEY ({tmp_path / 'key.txt'} does "
            f"not exist); its jobs wait until `eq-tui attach RUN --resume` runs where it is "
            f"set"]
        assert run.engine.jobs["uses_it"].status == JobStatus.PENDING
        await run.wait_for(lambda: run.engine.jobs["uses_it"].reason ==
                           "secret KEY not provided")
        (tmp_path / "key.txt").write_text("k\n")
        (tmp_path / "key.txt").chmod(0o600)
        await hand_over_secrets(client, saved, where="RUN", relative_to=str(tmp_path))
        assert "secrets it lacked: KEY" in capsys.readouterr().err
        await run.wait_for(lambda: run.engine.jobs["uses_it"].status == JobStatus.RUNNING)
        await hand_over_secrets(client, saved, where="RUN", relative_to=str(tmp_path))
        assert capsys.readouterr().err == ""  # nothing missing: nothing to say
        assert (await client.command("kill", ["uses_it"]))["ok"]
        await client.close()
    finally:
        await run.stop()
