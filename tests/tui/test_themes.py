"""Theme files load as Textual themes; user themes join them; the choice is remembered."""

from __future__ import annotations

import json
from pathlib import Path

from textual.app import App

from eq_tui.tui.config import load_settings, save_setting
from eq_tui.tui.themes import (
    DEFAULT_THEME,
    bundled_theme_dirs,
    choose_theme,
    load_themes,
    user_theme_dir,
)

APP_TCSS = Path(__file__).resolve().parents[2] / "eq_tui" / "tui" / "app.tcss"


def test_the_bundled_themes_load_and_register() -> None:
    catalog = load_themes(bundled_theme_dirs())
    assert catalog.problems == []
    assert {"eq-dark", "eq-light", "eq-ansi"} <= set(catalog.themes)
    assert catalog.themes["eq-ansi"].ansi
    assert not catalog.themes["eq-light"].dark
    app: App[None] = App()
    for theme in catalog.themes.values():
        app.register_theme(theme)
    for name in ("eq-dark", "eq-light", "eq-ansi"):
        app.theme = name
        assert app.current_theme.name == name


def test_a_user_theme_is_found_and_a_broken_one_is_reported(isolated_ui_config: Path) -> None:
    themes = user_theme_dir()
    themes.mkdir(parents=True)
    (themes / "mine.yaml").write_text("name: mine\nprimary: '#ff00ff'\ndark: true\n")
    (themes / "broken.toml").write_text("name = 'broken'\nprimary = '#fff'\nsparkle = 1\n")
    catalog = load_themes()
    assert "mine" in catalog.themes and "eq-dark" in catalog.themes
    assert any("sparkle" in problem for problem in catalog.problems)


def test_the_choice_is_requested_then_remembered_then_default(isolated_ui_config: Path) -> None:
    available = {"eq-dark", "eq-light"}
    assert choose_theme(None, available) == (DEFAULT_THEME, None)
    save_setting("theme", "eq-light")
    assert json.loads((isolated_ui_config / "settings.json").read_text()) == {"theme": "eq-light"}
    assert choose_theme(None, available) == ("eq-light", None)
    assert choose_theme("eq-dark", available) == ("eq-dark", None)
    chosen, problem = choose_theme("nope", available)
    assert chosen == "eq-light" and problem is not None and "nope" in problem


def test_unreadable_settings_are_ignored(isolated_ui_config: Path) -> None:
    isolated_ui_config.mkdir(parents=True)
    (isolated_ui_config / "settings.json").write_text("{not json")
    assert load_settings() == {}


def test_the_stylesheet_uses_theme_variables_only() -> None:
    import re

    text = APP_TCSS.read_text()
    assert not re.search(r"#[0-9a-fA-F]{3,8}\b(?![-\w])(?=[^{]*;)", text)
    assert not re.search(r":\s*(red|green|blue|white|black|yellow|magenta|cyan)\b", text)
    assert not re.search(r"\b(rgb|hsl)a?\(", text)


async def test_the_app_starts_and_draws_with_every_bundled_theme() -> None:
    from eq_tui.tui.app import EqTuiApp
    from tests.tui.fake_client import T0, FakeClient

    for name in ("eq-dark", "eq-light", "eq-ansi"):
        app = EqTuiApp([FakeClient()], theme=name, clock=lambda: T0)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("question_mark")
            await pilot.pause()
            assert app.current_theme.name == name
            assert app.return_code is None  # no stylesheet error ended it


def test_an_ansi_user_theme_gets_the_variables_textual_needs(isolated_ui_config: Path) -> None:
    themes = user_theme_dir()
    themes.mkdir(parents=True)
    (themes / "plain.toml").write_text("name = 'plain'\nprimary = 'ansi_blue'\nansi = true\n")
    theme = load_themes([themes]).themes["plain"]
    assert theme.variables["ansi-background"] == "ansi_black"
