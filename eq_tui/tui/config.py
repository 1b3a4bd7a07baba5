"""Where the UI keeps the user's settings and themes, and the remembered choices."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import platformdirs

CONFIG_DIR_ENV = "EQ_TUI_CONFIG_DIR"


def config_dir() -> Path:
    """The user's eq-tui config dir; EQ_TUI_CONFIG_DIR overrides it (tests point it at tmp)."""
    override = os.environ.get(CONFIG_DIR_ENV)
    if override:
        return Path(override)
    return Path(platformdirs.user_config_dir("eq-tui"))


def settings_file() -> Path:
    return config_dir() / "settings.json"


def load_settings() -> dict[str, Any]:
    """The saved settings, or {} when there are none or the file is unreadable."""
    try:
        data = json.loads(settings_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_setting(key: str, value: Any) -> None:
    """Remember one setting; a read-only config dir must not break the UI."""
    settings = load_settings()
    settings[key] = value
    path = settings_file()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(path)
