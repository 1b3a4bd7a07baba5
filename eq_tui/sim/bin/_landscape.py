"""fake-train's --landscape: a run whose final accuracy is a smooth function of its learning
rate, width and dropout, plus a small noise fixed by its seed, so a search over those three has
something to find (bench/search.py).

    final = 0.93 - 0.06 * log10(lr / lr_peak)^2 - 0.012 * log2(width / 256)^2
                 - 0.4 * (dropout - dropout_peak)^2 + noise
    lr_peak = 0.02 * sqrt(256 / width)            (wider nets want a smaller lr)
    dropout_peak = 0.12 + 0.06 * log2(width / 64) (and more dropout)
    noise: uniform in [-0.002, 0.002], the same for the same (lr, width, dropout, seed)

The best is 0.93 (before noise) at width 256, lr 0.02, dropout 0.24; the result is never below
chance (0.1). The epochs converge to it: epoch e of E reports
0.1 + (final - 0.1) * (1 - exp(-3 e / E)) / (1 - exp(-3)), rising to exactly `final` at E.
"""

from __future__ import annotations

import math
import random

PEAK_ACC = 0.93
PEAK_LR = 0.02
PEAK_WIDTH = 256
LR_FALL = 0.06  # per decade squared
WIDTH_FALL = 0.012  # per doubling squared
DROPOUT_FALL = 0.4
NOISE = 0.002
CHANCE = 0.1
PACE = 3.0  # how fast the epochs converge


def lr_peak(width: float) -> float:
    return PEAK_LR * math.sqrt(PEAK_WIDTH / width)


def dropout_peak(width: float) -> float:
    return 0.12 + 0.06 * math.log2(width / 64)


def smooth_accuracy(lr: float, width: float, dropout: float) -> float:
    """The landscape without noise."""
    if lr <= 0 or width <= 0:
        return CHANCE
    acc = (PEAK_ACC
           - LR_FALL * math.log10(lr / lr_peak(width)) ** 2
           - WIDTH_FALL * math.log2(width / PEAK_WIDTH) ** 2
           - DROPOUT_FALL * (dropout - dropout_peak(width)) ** 2)
    return max(CHANCE, acc)


def noise(lr: float, width: float, dropout: float, seed: int) -> float:
    """The seed's share: fixed by the parameters and the seed (string seeding hashes with
    SHA-512, the same in every process)."""
    return random.Random(f"{lr!r}:{width!r}:{dropout!r}:{seed}").uniform(-NOISE, NOISE)


def final_accuracy(lr: float, width: float, dropout: float, seed: int) -> float:
    return max(CHANCE, smooth_accuracy(lr, width, dropout) + noise(lr, width, dropout, seed))


def epoch_accuracy(final: float, epoch: int, epochs: int) -> float:
    """Epoch `epoch` of `epochs`: rising from chance, exactly `final` at the last."""
    done = (1 - math.exp(-PACE * epoch / epochs)) / (1 - math.exp(-PACE))
    return CHANCE + (final - CHANCE) * done


def epoch_loss(final: float, epoch: int, epochs: int) -> float:
    """Falling as the accuracy rises, to 1 - final plus what is left of the start's 2.3."""
    return 2.3 * math.exp(-PACE * epoch / epochs) + (1 - final)
