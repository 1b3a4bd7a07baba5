from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated_ui_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every UI test gets its own config dir (themes, settings.json) and UTC clock text."""
    config = tmp_path / "config"
    monkeypatch.setenv("EQ_TUI_CONFIG_DIR", str(config))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield config
    monkeypatch.undo()
    time.tzset()
