"""UI themes: the files in themes/ (or eq_tui/_themes in a wheel) and the user's own, loaded as
textual.theme.Theme objects."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml
from textual.theme import Theme

from eq_tui.tui.config import config_dir, load_settings

DEFAULT_THEME = "eq-dark"
THEME_SUFFIXES = (".toml", ".yaml", ".yml")
_THEME_FIELDS = {f.name for f in fields(Theme)}
ANSI_REQUIRED_VARIABLES = {"ansi-background": "ansi_black", "ansi-foreground": "ansi_white"}


@dataclass
class ThemeCatalog:
    themes: dict[str, Theme] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def bundled_theme_dirs() -> list[Path]:
    """The source checkout's themes/ and the wheel's copy of it."""
    package = Path(__file__).resolve().parent.parent
    return [package.parent / "themes", package / "_themes"]


def user_theme_dir() -> Path:
    return config_dir() / "themes"


def theme_from_mapping(data: dict[str, Any], source: str) -> Theme:
    unknown = sorted(set(data) - _THEME_FIELDS)
    if unknown:
        raise ValueError(f"{source}: unknown theme keys {', '.join(unknown)}")
    if not data.get("name") or not data.get("primary"):
        raise ValueError(f"{source}: a theme needs at least `name` and `primary`")
    values = dict(data)
    values["variables"] = {str(k): str(v) for k, v in (data.get("variables") or {}).items()}
    if values.get("ansi"):
        # Textual's own CSS refers to these in ANSI mode; a theme without them fails to start.
        for name, default in ANSI_REQUIRED_VARIABLES.items():
            values["variables"].setdefault(name, default)
    return Theme(**values)


def load_theme_file(path: Path) -> Theme:
    text = path.read_text(encoding="utf-8")
    data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a theme file holds one table of Theme fields")
    return theme_from_mapping(data, str(path))


def load_themes(dirs: list[Path] | None = None) -> ThemeCatalog:
    """Themes from the bundled dirs, then the user's (a user theme may replace a bundled one)."""
    catalog = ThemeCatalog()
    for directory in dirs if dirs is not None else [*bundled_theme_dirs(), user_theme_dir()]:
        if not directory.is_dir():
            continue
        for path in sorted(directory.iterdir()):
            if path.suffix not in THEME_SUFFIXES:
                continue
            try:
                theme = load_theme_file(path)
            except (OSError, ValueError, TypeError, tomllib.TOMLDecodeError,
                    yaml.YAMLError) as exc:
                catalog.problems.append(f"theme skipped: {exc}")
                continue
            catalog.themes[theme.name] = theme
    return catalog


def choose_theme(requested: str | None, available: set[str]) -> tuple[str, str | None]:
    """The theme to start with (asked for, else remembered, else the default) and, when the
    one asked for does not exist, a message saying so."""
    if requested:
        if requested in available:
            return requested, None
        fallback, _ = choose_theme(None, available)
        return fallback, (f"no theme named {requested!r}; using {fallback} "
                          f"(available: {', '.join(sorted(available))})")
    remembered = load_settings().get("theme")
    if isinstance(remembered, str) and remembered in available:
        return remembered, None
    if DEFAULT_THEME in available:
        return DEFAULT_THEME, None
    return "textual-dark", None
