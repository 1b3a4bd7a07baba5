"""The palette's "Stop the engine": asks first, then shuts the engine down and leaves the UI."""

from __future__ import annotations

from textual.widgets import Button

from eq_tui.api.commands import Shutdown
from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.screens.confirm import ConfirmScreen
from tests.tui.fake_client import T0, FakeClient, sample_snapshot
from tests.tui.pilot_wait import eventually

SIZE = (160, 48)


async def open_stop_from_palette(app: EqTuiApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("ctrl+p")
    await eventually(pilot, lambda: bool(app.screen.query("CommandList")))
    await pilot.press(*"stop the engine")

    def first_option() -> str:
        options = app.screen.query_one("CommandList")
        return str(options.get_option_at_index(0).prompt) \
            if options.option_count else ""  # type: ignore[attr-defined]

    await eventually(pilot, lambda: "Stop the engine" in first_option())
    await pilot.press("enter")
    await eventually(pilot, lambda: isinstance(app.screen, ConfirmScreen))


async def test_stop_asks_and_no_leaves_the_engine_alone() -> None:
    client = FakeClient()
    app = EqTuiApp([client], clock=lambda: T0, detach_on_quit=True)
    async with app.run_test(size=SIZE) as pilot:
        await open_stop_from_palette(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.title_text == "Stop the engine?"
        assert "keep running in their sessions" in app.screen.message
        assert app.screen.query_one("#no", Button).has_focus  # enter alone does not stop it
        await pilot.press("n")
        await eventually(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        await pilot.pause()
        assert client.commands == []
        assert app.is_running and not app.engine_stopped


async def test_stop_yes_shuts_the_engine_down_and_exits() -> None:
    client = FakeClient()
    app = EqTuiApp([client], clock=lambda: T0, detach_on_quit=True)
    async with app.run_test(size=SIZE) as pilot:
        await open_stop_from_palette(app, pilot)
        await pilot.press("y")
        await eventually(pilot, lambda: not app.is_running, what="the app to exit")
    assert client.sent == [Shutdown(by="ui")]
    assert app.engine_stopped
    assert app.return_value == 0


async def test_stop_reaches_every_engine_of_an_in_process_ui() -> None:
    first, second = FakeClient(), FakeClient(sample_snapshot("other"))
    app = EqTuiApp([first, second], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        app.action_stop_engine()
        await eventually(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "run the same command again" in app.screen.message  # type: ignore[attr-defined]
        await pilot.press("y")
        await eventually(pilot, lambda: not app.is_running, what="the app to exit")
    assert first.sent == second.sent == [Shutdown(by="ui")]


async def test_an_engine_that_went_away_is_shown_and_q_leaves_without_asking() -> None:
    app = EqTuiApp([FakeClient()], clock=lambda: T0, detach_on_quit=True)
    async with app.run_test(size=SIZE) as pilot:
        app.show_engine_gone("The queue finished and its engine exited; q leaves.",
                             finished=True)
        await eventually(pilot, lambda: any("engine exited" in n.message
                                            for n in app._notifications))
        await pilot.press("q")
        await eventually(pilot, lambda: not app.is_running, what="the app to exit")
    assert app.return_value == 0 and not app.engine_stopped
