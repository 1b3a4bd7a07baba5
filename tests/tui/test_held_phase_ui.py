"""A phase the crash guard holds, on the main screen: the retry pane says what to run, whole
(the alert line is cut to fit), beside the header's HELD."""

from __future__ import annotations

from eq_tui.api.events import PhaseHeld
from eq_tui.tui.app import EqTuiApp
from tests.tui.fake_client import T0, FakeClient
from tests.tui.pilot_wait import eventually


async def test_the_retry_pane_says_what_to_run_for_a_held_phase() -> None:
    client = FakeClient()
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        client.publish(PhaseHeld(project="demo", at=T0, phase="distill",
                                 jobs=("student_nan",), failure_class="exit_nonzero",
                                 line="ValueError", reason="crash guard: ..."))

        def pane() -> str:
            return str(app.query_one("#retry-body").render())

        await eventually(pilot, lambda: "phase distill held" in pane())
        text = " ".join(pane().split())
        assert ("phase distill held: it waits for a person: fix the command, then `eq-tui "
                "retry /nonexistent/run --stuck --phase distill` (retries every stuck job of "
                "the phase and releases it), or `eq-tui release /nonexistent/run --phase "
                "distill` to launch the rest as they are") in text
        assert "HELD: distill" in str(app.query_one("#header").render())
