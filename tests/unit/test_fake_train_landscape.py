"""fake-train's --landscape (bench/search.py's ground truth): the final accuracy peaks where its
docstring says, falls off smoothly around it, carries a seed noise that is bounded and fixed by
(params, seed), and the epochs converge to it; fake-train itself prints exactly that."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "eq_tui" / "sim" / "bin"
sys.path.insert(0, str(BIN))

import _landscape as land  # noqa: E402

LRS = [10 ** (k / 8) for k in range(-32, 1)]  # 1e-4 .. 1, 8 a decade
WIDTHS = [64, 128, 256, 512]
DROPOUTS = [k / 50 for k in range(26)]  # 0 .. 0.5


def test_the_peak_is_where_documented() -> None:
    assert land.smooth_accuracy(0.02, 256, 0.24) == pytest.approx(0.93, abs=1e-12)
    best = max(land.smooth_accuracy(lr, w, d) for lr in LRS for w in WIDTHS for d in DROPOUTS)
    assert best < 0.93
    for step in (1.1, 1 / 1.1):
        assert land.smooth_accuracy(0.02 * step, 256, 0.24) < 0.93
    for width in (128, 200, 300, 512):
        assert land.smooth_accuracy(0.02, width, 0.24) < 0.93
    for dropout in (0.23, 0.25):
        assert land.smooth_accuracy(0.02, 256, dropout) < 0.93


def test_reference_points() -> None:
    # by hand from the formula in the docstring
    assert land.smooth_accuracy(0.2, 256, 0.24) == pytest.approx(0.87)
    assert land.smooth_accuracy(0.02, 256, 0.34) == pytest.approx(0.93 - 0.004)
    assert land.smooth_accuracy(0.04, 64, 0.12) == pytest.approx(0.93 - 0.048)
    assert land.lr_peak(1024) == pytest.approx(0.01)
    assert land.dropout_peak(512) == pytest.approx(0.30)
    expected = 0.93 - 0.012 - 0.06 * math.log10(0.02 / (0.02 / math.sqrt(2))) ** 2
    assert land.smooth_accuracy(0.02, 512, 0.30) == pytest.approx(expected)
    assert land.smooth_accuracy(1e-9, 64, 0.5) == land.CHANCE  # far off: chance, never below


def test_it_is_smooth() -> None:
    """Neighbouring points on a fine grid differ by little (no step, no spike)."""
    for w in WIDTHS:
        for d in DROPOUTS:
            values = [land.smooth_accuracy(lr, w, d) for lr in LRS]
            # the steepest: 2 * 0.06 per decade^2 * 3 decades off the peak, 1/8 decade apart
            assert max(abs(a - b) for a, b in pairwise(values)) < 0.045
        for lr in LRS:
            values = [land.smooth_accuracy(lr, w, d) for d in DROPOUTS]
            assert max(abs(a - b) for a, b in pairwise(values)) < 0.006


def test_noise_is_bounded_fixed_by_params_and_seed() -> None:
    noises = [land.noise(lr, w, 0.2, seed) for lr in LRS for w in WIDTHS for seed in range(4)]
    assert max(abs(n) for n in noises) <= land.NOISE == 0.002
    assert max(noises) - min(noises) > 0.003  # it is there, across both signs
    assert land.final_accuracy(0.03, 128, 0.1, 7) == land.final_accuracy(0.03, 128, 0.1, 7)
    assert land.final_accuracy(0.03, 128, 0.1, 7) != land.final_accuracy(0.03, 128, 0.1, 8)
    base = land.noise(0.03, 128, 0.1, 7)  # each of the four moves it
    assert len({base, land.noise(0.031, 128, 0.1, 7), land.noise(0.03, 256, 0.1, 7),
                land.noise(0.03, 128, 0.11, 7), land.noise(0.03, 128, 0.1, 8)}) == 5
    final = land.final_accuracy(0.03, 128, 0.1, 7)
    assert abs(final - land.smooth_accuracy(0.03, 128, 0.1)) <= 0.002


def test_epochs_converge_to_the_final_value() -> None:
    final = land.final_accuracy(0.01, 256, 0.2, 3)
    accs = [land.epoch_accuracy(final, e, 6) for e in range(1, 7)]
    losses = [land.epoch_loss(final, e, 6) for e in range(1, 7)]
    assert accs[-1] == pytest.approx(final, abs=1e-12)
    assert all(a < b for a, b in pairwise(accs))
    assert all(a > b for a, b in pairwise(losses))
    assert land.CHANCE < accs[0] < final


def _last_val_acc(tmp_path: Path, seed: int) -> float:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "config.json").write_text("{}")
    env = {**os.environ, "EQ_SIM_STATE": str(state), "CUDA_VISIBLE_DEVICES": "0",
           "EQ_JOB_ID": "j", "EQ_ATTEMPT": "1"}
    done = subprocess.run(
        [sys.executable, str(BIN / "fake-train"), "--epoch-seconds", "0", "--epochs", "3",
         "--landscape", "--lr", "0.005", "--width", "128", "--dropout", "0.35",
         "--seed", str(seed)], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    found = re.findall(r"epoch (\d)/3 loss=\S+ val_acc=(\S+)", done.stdout)
    assert [e for e, _ in found] == ["1", "2", "3"], done.stdout
    return float(found[-1][1])


def test_fake_train_prints_the_landscape(tmp_path: Path) -> None:
    for seed in (1, 2):
        assert _last_val_acc(tmp_path, seed) == round(
            land.final_accuracy(0.005, 128, 0.35, seed), 4)
