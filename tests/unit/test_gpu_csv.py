"""nvidia-smi's CSV and pmon output read line by line: each figure, each warning's exact text.

tests/unit/test_fuzz.py shows that no text makes these parsers raise; here each field lands
where it belongs and each odd value is named in its warning.
"""

from __future__ import annotations

import pytest

from eq_tui.hosts.base import GpuProcess, GpuReading
from eq_tui.hosts.gpu_csv import parse_apps, parse_gpus, parse_pmon


def test_gpu_lines_give_every_field() -> None:
    gpus, warnings = parse_gpus(" 0, GPU-aa, NVIDIA H100 80GB HBM3, 1024, 81559, 37, 112.5 W\n\n"
                                "1,GPU-bb,Sim,0,24576,0,[N/A]\n"
                                "2,GPU-cc,Old,5,24576,9\n")  # an older probe: no power.draw
    assert gpus == [GpuReading(0, "GPU-aa", "NVIDIA H100 80GB HBM3", 1024, 81559, 37,
                               power_w=112.5),
                    GpuReading(1, "GPU-bb", "Sim", 0, 24576, 0, power_w=None),
                    GpuReading(2, "GPU-cc", "Old", 5, 24576, 9, power_w=None)]
    assert warnings == []


@pytest.mark.parametrize(("cell", "value"), [
    ("12 MiB", 12), ("12MiB", 12), ("99 %", 99), ("1e3", 1000), ("7.9", 7), (" 5 ", 5),
    ("[N/A]", None), ("[Not Supported]", None), ("", None), ("nan", None), ("1e999", None),
    ("7 XMiB", None),  # a unit it does not know
])
def test_a_cell_with_units_reads_as_its_number_and_odd_ones_as_none(cell: str,
                                                                     value: int | None) -> None:
    gpus, _ = parse_gpus(f"0, GPU-a, X, 10, {cell}, {cell}")
    assert (gpus[0].memory_total_mib, gpus[0].utilization_pct) == (value, value)


def test_a_gpu_line_with_the_wrong_field_count_is_a_warning_with_the_line() -> None:
    long = "0, GPU-a, " + "x" * 200
    gpus, warnings = parse_gpus("0, GPU-a, X, 1, 2\n0, GPU-a, X, 1, 2, 3, 4, 5\n" + long)
    assert gpus == []
    assert warnings == ["nvidia-smi: unexpected line '0, GPU-a, X, 1, 2'",
                        "nvidia-smi: unexpected line '0, GPU-a, X, 1, 2, 3, 4, 5'",
                        f"nvidia-smi: unexpected line {long[:120]!r}"]


def test_a_gpu_line_without_an_index_is_a_warning_with_the_line() -> None:
    line = "[N/A], GPU-a, X, 1, 2, 3"
    gpus, warnings = parse_gpus(line + "\n" + "x" * 150 + ", a, b, 1, 2, 3")
    assert gpus == []
    assert warnings == [f"nvidia-smi: no GPU index in {line!r}",
                        f"nvidia-smi: no GPU index in {('x' * 150)[:120]!r}"]


def test_a_gpu_without_a_memory_reading_is_kept_with_a_warning() -> None:
    gpus, warnings = parse_gpus("3, GPU-a, X, [Unknown Error], 80, 1")
    assert gpus == [GpuReading(3, "GPU-a", "X", None, 80, 1)]
    assert warnings == ["GPU 3: memory.used is '[Unknown Error]'; no launches on it"]


def test_app_lines_give_pid_gpu_and_memory() -> None:
    apps, warnings = parse_apps("No running processes found\n"
                                " 4242, GPU-aa, 1500 MiB \n\n77,GPU-bb,[N/A]\n")
    assert apps == [GpuProcess(4242, "GPU-aa", 1500), GpuProcess(77, "GPU-bb", None)]
    assert warnings == []
    assert parse_apps("NO RUNNING processes") == ([], [])


def test_an_app_line_that_is_not_one_is_a_warning_with_the_line() -> None:
    long = "y" * 130
    apps, warnings = parse_apps("4242, GPU-aa\n4242, GPU-aa, 1, 2\nabc, GPU-aa, 1\n" + long)
    assert apps == []
    assert warnings == [
        "nvidia-smi compute apps: unexpected line '4242, GPU-aa'",
        "nvidia-smi compute apps: unexpected line '4242, GPU-aa, 1, 2'",
        "nvidia-smi compute apps: unexpected line 'abc, GPU-aa, 1'",
        f"nvidia-smi compute apps: unexpected line {long[:120]!r}"]


def test_pmon_skips_headers_short_lines_and_lines_without_numbers() -> None:
    text = ("# gpu   pid  type  sm  mem\n"
            "   # Idx  #  C/G  %  %\n"
            "0 12 C 40 3\n"
            "1 13 C\n"
            "x 14 C 50\n"
            "2 y C 50\n"
            "3 15 C - -\n"
            "4 16 G 2\n")
    assert parse_pmon(text) == {(0, 12): 40, (3, 15): 0, (4, 16): 2}


@pytest.mark.parametrize(("cell", "watts"), [
    ("112.5 W", 112.5), ("112.5W", 112.5), (" 0 ", 0.0), ("0.4", 0.4), ("[N/A]", None),
    ("[Not Supported]", None), ("-5", None), ("inf", None), ("nan", None), ("", None),
])
def test_power_draw_reads_as_watts_and_odd_ones_as_unknown(cell: str,
                                                            watts: float | None) -> None:
    gpus, warnings = parse_gpus(f"0, GPU-a, X, 10, 20, 30, {cell}")
    assert gpus[0].power_w == watts and warnings == []
