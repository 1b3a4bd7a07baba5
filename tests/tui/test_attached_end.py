"""The UI attached to an engine over its control socket, at the end of the run: the engine
finishes its queue and exits. Alerts carry wall-clock times (their age reads in seconds), a
normal finish raises no warning or error, and the log pane still shows a log that is on this
machine's disk."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from eq_tui.api.reconnecting import ReconnectingClient
from eq_tui.cli.attach import local_connector, tell_when_gone
from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.retry_pane import retry_content
from tests.support.engine_run import job, make_manifest, sim_hosts, start_engine
from tests.tui.pilot_wait import eventually

pytestmark = pytest.mark.integration
JOB = "fake-train --epochs 3 --epoch-seconds 0.3 --mem 500"


async def test_a_detached_run_ends_calmly_in_the_attached_ui(tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("a", JOB), job("b", JOB)],
                             hosts=sim_hosts(("sim", 2)))
    run_dir = tmp_path / "run"
    run = await start_engine(manifest, run_dir, exit_when_done=True)
    client = await ReconnectingClient.open(local_connector(run_dir), where=str(run_dir),
                                           local_logs=True)
    assert client is not None
    app = EqTuiApp([client], detach_on_quit=True)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            watcher = app.run_worker(tell_when_gone(app, client, "eq-tui status RUN"))
            await eventually(pilot, lambda: bool(app.engine_gone), timeout=60,
                             what="the engine exits once its queue is done")
            await watcher.wait()
            assert app.engine_gone.startswith("The queue finished")
            assert app.sub_title == "engine exited"
            levels = [(a.get("level"), a.get("message")) for a in app.view.alerts]
            assert not [a for a in levels if a[0] in ("warning", "error")], levels
            # every alert's time is the wall clock's: its age reads in seconds, not in
            # hundreds of thousands of hours
            now = time.time()
            assert all(abs(now - float(a["at"])) < 300 for a in app.view.alerts)
            ages = re.findall(r"(\S+) ago", str(retry_content(app.view, now)))
            assert ages and all(age.endswith("s") and "h" not in age for age in ages), ages
            # the engine is gone; the logs are on this disk, and the pane shows them
            table = app.query_one(JobTable)
            for job_id in ("b", "a"):
                table.move_cursor(row=table.get_row_index(f"t/{job_id}"))
                await eventually(pilot, lambda: any(
                    "epoch 3/3" in line for line in app.log_pane.log_widget.lines),
                    what=f"{job_id}'s log from disk")
                assert not any("unavailable" in line
                               for line in app.log_pane.log_widget.lines)
            assert await app.tail("t/a", 1) == await app.tail("t/a", None)
            # the Log widget measures new lines in a thread worker that calls back into the
            # app: leaving while one runs fails it (Textual's NoActiveAppError)
            log = app.log_pane.log_widget
            await eventually(pilot, lambda: not [w for w in app.workers
                                                 if w.node is log and not w.is_finished],
                             what="the log pane's width workers done")
    finally:
        await client.close()
        await run.stop()
