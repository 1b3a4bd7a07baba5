"""Numbers as a person writes them: a mean ± std rounded to the std's first two significant
digits and the mean to the same decimal (`0.763 ± 0.010`); GPU time in the unit that fits
(`42 GPU-s`, `3.3 GPU-min`, `1.4 GPU-h`) and energy in Wh or kWh. For what is read on a screen
or in a table only: JSON and CSV keep full precision. Pure."""

from __future__ import annotations

import math

SIGNIFICANT = 4  # a lone value (no spread to round it by)
STD_DIGITS = 2
MAX_DECIMALS = 6  # more than this and the pair reads better in e-notation


def plain(value: float | None) -> str:
    """A lone value to 4 significant digits; `-` for none."""
    return "-" if value is None else f"{value:.{SIGNIFICANT}g}"


def _exponent(value: float) -> int:
    return math.floor(math.log10(abs(value)))


def _decimals(std: float) -> int:
    """How many decimals show the std's first two significant digits (negative: it rounds to
    tens, hundreds...), once rounded: 0.009991 is 0.010, three decimals."""
    decimals = STD_DIGITS - 1 - _exponent(std)
    if _exponent(round(std, decimals)) > _exponent(std):
        decimals -= 1
    return decimals


def _fixed(value: float, decimals: int) -> str:
    if decimals > 0:
        return f"{value:.{decimals}f}"
    return f"{round(value, decimals):.0f}"


def mean_std(mean: float | None, std: float | None, *, pm: str = "±") -> str:
    """`0.763 ± 0.010`, `12350 ± 120`, `(1.234 ± 0.056)e-07`; the mean alone without a std
    (one value), `± 0` when every value was the same; `-` without a mean."""
    if mean is None or not math.isfinite(mean):
        return plain(mean)
    if std is None or not math.isfinite(std):
        return plain(mean)
    if std == 0:
        return f"{plain(mean)} {pm} 0"
    decimals = _decimals(std)
    if decimals <= MAX_DECIMALS and (mean == 0 or _exponent(mean) < 9):
        return f"{_fixed(mean, decimals)} {pm} {_fixed(std, decimals)}"
    scale = _exponent(mean) if mean and abs(mean) > abs(std) else _exponent(std)
    shift = 10.0 ** scale
    inner = max(0, _decimals(std / shift))
    return f"({mean / shift:.{inner}f} {pm} {std / shift:.{inner}f})e{scale:+03d}"


def two_digits(value: float) -> str:
    """A quantity with a unit: at least two significant digits, no more decimals than that
    needs (`3.3`, `42`, `1234`, `0.26`)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    if abs(value) >= 10:
        return f"{value:.0f}"
    decimals = max(1, STD_DIGITS - 1 - _exponent(value))
    return f"{value:.{decimals}f}"


GPU_TIME_UNITS = (("GPU-s", 1.0), ("GPU-min", 60.0), ("GPU-h", 3600.0))
ENERGY_UNITS = (("Wh", 1.0), ("kWh", 1000.0))


def gpu_time_unit(seconds: float) -> tuple[str, float]:
    """The unit GPU time of this size reads in, and its size in seconds: seconds under a
    minute, minutes under an hour, hours beyond."""
    chosen = GPU_TIME_UNITS[0]
    for unit in GPU_TIME_UNITS:
        if abs(seconds) >= unit[1]:
            chosen = unit
    return chosen


def energy_unit(wh: float) -> tuple[str, float]:
    """Wh under a kWh, kWh beyond."""
    return ENERGY_UNITS[1] if abs(wh) >= ENERGY_UNITS[1][1] else ENERGY_UNITS[0]


def gpu_time(seconds: float) -> str:
    """`42 GPU-s`, `3.3 GPU-min`, `1.4 GPU-h`."""
    unit, size = gpu_time_unit(seconds)
    return f"{two_digits(seconds / size)} {unit}"


def energy(wh: float | None) -> str:
    """`0.26 Wh`, `21 Wh`, `1.4 kWh`; `-` when unknown."""
    if wh is None:
        return "-"
    unit, size = energy_unit(wh)
    return f"{two_digits(wh / size)} {unit}"


def _with_unit(mean: float | None, std: float | None, unit: tuple[str, float],
               pm: str) -> str:
    name, size = unit
    if mean is None:
        return "-"
    if std is None or std == 0:
        return f"{two_digits(mean / size)}{f' {pm} 0' if std == 0 else ''} {name}"
    return f"{mean_std(mean / size, std / size, pm=pm)} {name}"


def gpu_time_mean_std(mean_s: float | None, std_s: float | None, *, pm: str = "±") -> str:
    """GPU time's mean ± std in the unit its mean reads in: `3.277 ± 0.044 GPU-s`."""
    return _with_unit(mean_s, std_s, gpu_time_unit(mean_s or 0.0), pm)


def energy_mean_std(mean_wh: float | None, std_wh: float | None, *, pm: str = "±") -> str:
    """Energy's mean ± std in Wh or kWh, by its mean: `0.257 ± 0.010 Wh`."""
    return _with_unit(mean_wh, std_wh, energy_unit(mean_wh or 0.0), pm)
