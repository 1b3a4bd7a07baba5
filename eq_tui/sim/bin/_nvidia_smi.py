#!/usr/bin/env python3
"""Simulated nvidia-smi: answers from the state directory named by $EQ_SIM_STATE.

Supported: --query-gpu=FIELDS, --query-compute-apps=FIELDS, --format=csv[,noheader][,nounits],
-i/--id=LIST, -L/--list-gpus, `pmon -c 1 [-s u]` (one sample of each process's own
utilisation, `-` for a process that computes nothing, as an H100 prints it) and no arguments
(a short table). Like the real tool it ignores
CUDA_VISIBLE_DEVICES.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import _simcore as core  # noqa: E402 - found through the line above

QUIRK_TEXT = {"na": "[N/A]", "not_supported": "[Not Supported]"}


def fail_driver() -> int:
    print(core.DRIVER_FAILURE)
    return 9


def fail_usage(message: str) -> int:
    print(message)
    print("Please run 'nvidia-smi -h' for help.")
    return 2


if TYPE_CHECKING:
    Field = tuple[str, str, Callable[..., str], bool]  # header, unit, getter, affected by quirks


def gpu_fields(config: dict[str, Any]) -> dict[str, Field]:
    host, total = str(config["host"]), int(config["memory_mib"])

    def used(i: int, apps: list[core.ComputeApp]) -> str:
        return str(core.used_mib(config, apps, i))

    def free(i: int, apps: list[core.ComputeApp]) -> str:
        return str(max(0, total - core.used_mib(config, apps, i)))

    uuid: Field = ("uuid", "", lambda i, _: core.gpu_uuid(host, i), False)
    name: Field = ("name", "", lambda i, _: str(config["model"]), False)
    return {
        "index": ("index", "", lambda i, _: str(i), False),
        "uuid": uuid,
        "gpu_uuid": uuid,
        "name": name,
        "gpu_name": name,
        "count": ("count", "", lambda i, _: str(config["gpus"]), False),
        "memory.used": ("memory.used", "MiB", used, True),
        "memory.free": ("memory.free", "MiB", free, True),
        "memory.total": ("memory.total", "MiB", lambda i, _: str(total), False),
        "utilization.gpu": ("utilization.gpu", "%",
                            lambda i, apps: str(core.utilization(apps, i)), True),
        "power.draw": ("power.draw", "W", lambda i, apps: power(config, apps, i), True),
        "ecc.errors.uncorrected.volatile.total": (
            "ecc.errors.uncorrected.volatile.total", "",
            lambda i, _: str(core.health(config, i)[0]), True),
        "retired_pages.pending": ("retired_pages.pending", "",
                                  lambda i, _: "Yes" if core.health(config, i)[1] else "No",
                                  True),
    }


def power(config: dict[str, Any], apps: list[core.ComputeApp], gpu: int) -> str:
    if config.get("no_power"):
        return "[N/A]"  # a card without a power reading
    return f"{core.power_w(config, core.utilization(apps, gpu)):.2f}"


def app_fields(config: dict[str, Any]) -> dict[str, Field]:
    host = str(config["host"])
    mem: Field = ("used_gpu_memory", "MiB", lambda a: str(a.mib), True)
    return {
        "pid": ("pid", "", lambda a: str(a.pid), False),
        "gpu_uuid": ("gpu_uuid", "", lambda a: core.gpu_uuid(host, a.gpu), False),
        "gpu_name": ("gpu_name", "", lambda a: str(config["model"]), False),
        "process_name": ("process_name", "",
                         lambda a: "python" if a.foreign else "python3", False),
        "used_memory": mem,
        "used_gpu_memory": mem,
    }


def split_fields(spec: str) -> list[str]:
    return [name.strip() for name in spec.split(",") if name.strip()]


def render_csv(
    names: list[str], fields: dict[str, Field], rows: list[tuple[Any, ...]],
    fmt: set[str], quirk: str | None,
) -> list[str]:
    for name in names:
        if name not in fields:
            raise KeyError(name)
    lines = []
    if "noheader" not in fmt:
        lines.append(", ".join(
            f"{fields[n][0]} [{fields[n][1]}]" if fields[n][1] else fields[n][0] for n in names))
    for row in rows:
        cells = []
        for n in names:
            _, unit, getter, quirky = fields[n]
            if quirky and quirk in QUIRK_TEXT:
                cells.append(QUIRK_TEXT[quirk])
            elif unit and "nounits" not in fmt:
                cells.append(f"{getter(*row)} {unit}")
            else:
                cells.append(getter(*row))
        lines.append(", ".join(cells))
    return lines


def table(config: dict[str, Any], indices: list[int], apps: list[core.ComputeApp]) -> list[str]:
    quirk = config["quirk"]
    rule = "+" + "-" * 72 + "+"
    lines = [rule, f"| NVIDIA-SMI (simulated)   host: {config['host']:<40}|", rule]
    for i in indices:
        used = QUIRK_TEXT.get(quirk, f"{core.used_mib(config, apps, i)}MiB")
        util = QUIRK_TEXT.get(quirk, f"{core.utilization(apps, i)}%")
        lines.append(f"| {i:>2}  {config['model'][:28]:<28} {used:>15} / "
                     f"{config['memory_mib']}MiB {util:>8} |")
    lines += [rule, "| Processes:  GPU   PID      Used" + " " * 40 + "|"]
    for a in apps:
        used = QUIRK_TEXT.get(quirk, f"{a.mib}MiB")
        lines.append(f"|             {a.gpu:>3}   {a.pid:<8} {used:<43}|")
    lines.append(rule)
    return lines


def load_state() -> tuple[Path, dict[str, Any]] | None:
    """The state directory and its config; None where the real tool would find no driver."""
    state_dir = core.state_dir_from_env()
    if state_dir is None:
        return None
    try:
        config = core.load_config(state_dir)
    except core.ConfigMissing:
        return None
    return None if config["quirk"] == "fail" else (state_dir, config)


def pmon(config: dict[str, Any], apps: list[core.ComputeApp]) -> list[str]:
    """`nvidia-smi pmon -c 1 -s u`: a line per process and GPU, its own SM utilisation."""
    lines = ["# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command",
             "# Idx           #    C/G      %      %      %      %      %      %    name"]
    for a in sorted(apps, key=lambda app: (app.gpu, app.pid)):
        if a.foreign and a.pid <= 0:
            continue
        own = core.process_utilization(a)
        sm = "-" if not own else str(own)
        lines.append(f"    {a.gpu:>1} {a.pid:>11}     C {sm:>6} {'-':>6} {'-':>6} {'-':>6} "
                     f"{'-':>6} {'-':>6}    python3")
    return lines


def pmon_args(args: list[str]) -> str | None:
    """Why these pmon arguments are not supported, or None (one sample: `-c 1`)."""
    if "-c" not in args or args[args.index("-c") + 1:args.index("-c") + 2] != ["1"]:
        return "this simulator takes one sample only: pmon -c 1 [-s u]"
    return None


def main(argv: list[str]) -> int:
    if argv[:1] == ["pmon"]:
        return main_pmon(argv[1:])
    query_gpu: str | None = None
    query_apps: str | None = None
    fmt: set[str] | None = None
    ids: str | None = None
    list_gpus = False
    args = list(argv)
    while args:
        arg = args.pop(0)
        key, eq, value = arg.partition("=")
        if key in ("--query-gpu", "--query-compute-apps", "--format", "-i", "--id") and not eq:
            if not args:
                return fail_usage(f"Option {key} requires a value.")
            value = args.pop(0)
        if key == "--query-gpu":
            query_gpu = value
        elif key == "--query-compute-apps":
            query_apps = value
        elif key == "--format":
            fmt = {part.strip() for part in value.split(",")}
        elif key in ("-i", "--id"):
            ids = value
        elif arg in ("-L", "--list-gpus"):
            list_gpus = True
        else:
            return fail_usage("Invalid combination of input arguments.")
    if (query_gpu or query_apps) and (fmt is None or "csv" not in fmt):
        return fail_usage('"--format=" switch is missing. Please specify "--format=csv".')

    loaded = load_state()
    if loaded is None:
        return fail_driver()
    state_dir, config = loaded
    quirk = config["quirk"]
    if quirk == "empty":
        return 0

    count = int(config["gpus"])
    indices = core.listed_gpus(config)
    if ids is not None:
        try:
            indices = [int(part) for part in ids.split(",")]
        except ValueError:
            return fail_usage(f"Invalid GPU id: {ids}")
        if any(not 0 <= i < count or i not in core.listed_gpus(config) for i in indices):
            print("No devices were found")
            return 6
    apps = core.compute_apps(state_dir, config)

    try:
        if query_gpu is not None:
            rows: list[tuple[Any, ...]] = [(i, apps) for i in indices]
            out = render_csv(split_fields(query_gpu), gpu_fields(config), rows, fmt or set(), quirk)
        elif query_apps is not None:
            rows = [(a,) for a in apps if a.gpu in indices]
            out = render_csv(split_fields(query_apps), app_fields(config), rows, fmt or set(),
                             quirk)
        elif list_gpus:
            out = [f"GPU {i}: {config['model']} (UUID: {core.gpu_uuid(config['host'], i)})"
                   for i in indices]
        else:
            out = table(config, indices, [a for a in apps if a.gpu in indices])
    except KeyError as exc:
        print(f'Field "{exc.args[0]}" is not a valid field to query.')
        return 2
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    return 0


def main_pmon(args: list[str]) -> int:
    problem = pmon_args(args)
    if problem is not None:
        return fail_usage(problem)
    loaded = load_state()
    if loaded is None:
        return fail_driver()
    state_dir, config = loaded
    apps = [a for a in core.compute_apps(state_dir, config) if a.alive]
    print("\n".join(pmon(config, apps)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
