"""`early_stop:` beside a search (manifest/search_early_stop.py): `hyperband` only with a search,
and the metric early stopping reads better the same way as the search's; each mistake exit 2
with its key path (also through `--dry-run`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from eq_tui.errors import ManifestError
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import Manifest

SEARCH = """
project: p
goal: {val_acc: max}
EARLY
search: {space: {lr: {low: 0.001, high: 0.1}}, trials: 4}
template: {cmd: "train --lr ${lr}"}
"""
GRID = """
project: p
goal: {val_acc: max}
EARLY
grid: {lr: [0.1, 0.01]}
template: {cmd: "train --lr ${lr}"}
"""
PHASES = """
project: p
goal: {val_acc: max, val_loss: min}
TOP
phases:
  - name: prep
    jobs: [{id: a, cmd: prep}]
PREP
  - name: tune
    search: {space: {lr: {low: 0.001, high: 0.1}}, trials: 4, metric: val_acc}
    template: {cmd: "train --lr ${lr}"}
TUNE
"""
HYPERBAND = "early_stop: {metric: val_acc, rule: hyperband, grace: 2, eta: 4}"


def load(text: str) -> Manifest:
    return load_manifest_text(text, "m.yaml")


def error(text: str) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        load(text)
    assert info.value.exit_code == 2
    return info.value


def phases(top: str = "", prep: str = "", tune: str = "") -> str:
    return PHASES.replace("TOP", top).replace("PREP", prep).replace("TUNE", tune)


def test_hyperband_is_a_searchs_rule() -> None:
    spec = load(SEARCH.replace("EARLY", HYPERBAND)).phases[0].results.early_stop
    assert spec is not None and (spec.rule, spec.grace, spec.eta) == ("hyperband", 2, 4)
    exc = error(GRID.replace("EARLY", HYPERBAND))
    assert exc.key_path == "early_stop.rule"
    assert "Optuna's pruner" in str(exc) and "the manifest has no search" in str(exc)
    assert "use asha or median" in str(exc)
    for rule in ("asha", "median"):
        load(GRID.replace("EARLY", HYPERBAND.replace("hyperband", rule)))


def test_a_phase_without_a_search_names_where_hyperband_was_said() -> None:
    own = error(phases(prep="    " + HYPERBAND))
    assert own.key_path == "phases[0].early_stop.rule" and "phase 'prep'" in str(own)
    inherited = error(phases(top=HYPERBAND))
    assert inherited.key_path == "early_stop.rule" and "phase 'prep'" in str(inherited)
    # the phase without a search turns it off: the search's phase keeps it
    manifest = load(phases(top=HYPERBAND, prep="    early_stop: false"))
    assert [p.results.early_stop is not None for p in manifest.phases] == [False, True]


def test_early_stop_must_go_the_way_the_search_goes() -> None:
    exc = error(phases(tune="    early_stop: {metric: val_loss}"))
    assert exc.key_path == "phases[1].early_stop.metric"
    assert "val_loss (min)" in str(exc) and "val_acc max" in str(exc)
    exc = error(SEARCH.replace("EARLY", "early_stop: {metric: val_acc, goal: min}"))
    assert exc.key_path == "early_stop.goal"
    inherited = error(phases(top="early_stop: {metric: val_loss}"))
    assert inherited.key_path == "early_stop.metric" and "phase 'tune'" in str(inherited)
    # another metric is fine when it goes the same way
    load(phases(tune="    early_stop: {metric: train_acc, goal: max}"))


def test_dry_run_exits_2_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(GRID.replace("EARLY", HYPERBAND))
    done = subprocess.run([sys.executable, "-m", "eq_tui", str(path), "--dry-run"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    assert "early_stop.rule" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
