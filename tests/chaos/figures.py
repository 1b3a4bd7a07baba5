"""The chaos run's figures in the docs, from its JSON and nothing else:

    .venv/bin/python -m tests.chaos.chaos --json > /tmp/chaos.json
    .venv/bin/python -m tests.chaos.figures /tmp/chaos.json

keeps the run as docs/chaos_long.json (with the commit it ran at and the date) and rewrites
every block between `<!-- chaos-figures:NAME -->` and `<!-- /chaos-figures -->` in README.md,
docs/testing.md and docs/reliability.md from it. tests/chaos/test_figures.py checks that the
blocks say what the record says, so no figure is typed by hand."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
RECORD = ROOT / "docs" / "chaos_long.json"
DOCS = ("README.md", "docs/testing.md", "docs/reliability.md")
BLOCK = re.compile(r"(<!-- chaos-figures:(?P<name>[a-z]+) -->\n)(?P<body>.*?)"
                   r"(<!-- /chaos-figures -->)", re.S)
ZEROS = ("duplicate_launches", "overlaps_released", "overlaps_exit", "lost",
         "completed_unverified", "stuck_unverified", "wrong_status", "left_running",
         "retried_unexplained", "idle_faults", "restarts_wrong", "final_metric_mismatches")


def _kinds(by_kind: dict[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(by_kind.items()))


READ = {"duplicate_launches": "duplicate launches",
        "overlaps_released": "starts on a GPU before its memory was released",
        "lost": "lost jobs",
        "completed_unverified": "completed jobs without an exit-0 run and its output on a host"}


def readme(run: dict[str, Any]) -> str:
    v = run["verdict"]
    zeros = ", ".join(f"{v[k]} {words}" for k, words in READ.items())
    text = (f"The long run (commit {run['commit']}, {run['date']}, {v['wall_s']:.0f} s): "
            f"{v['jobs']} jobs, {v['faults']} faults of {len(v['faults_by_kind'])} kinds, "
            f"{v['faults_effective']} of them with a trace; from the hosts' own records: "
            f"{zeros}{restarts(v)}; verdict {'ok' if v['ok'] else 'FAILED'}.")
    return textwrap.fill(text, 96) + "\n"


def restarts(v: dict[str, Any]) -> str:
    """The checkpoint contracts' figures, for a run that has them (tests/chaos/resumes.py)."""
    if "restarts" not in v:
        return ""
    lost = ", ".join(f"{cause} {s:.0f} s" for cause, s in v["gpu_s_lost_by_cause"].items())
    return (f"; {v['restarts']} restarts, {v['restarts_resumed']} from a checkpoint, "
            f"{v['restarts_wrong']} not from the newest one there (GPU time lost: {lost})")


def testing(run: dict[str, Any]) -> str:
    v = {k: val for k, val in run["verdict"].items()
         if k not in ("details", "fault_traces", "seed")}
    lines = textwrap.wrap(json.dumps(v), 96)
    return (f"Commit {run['commit']}, {run['date']}, seed {run['seed']}:\n\n```json\n"
            + "\n".join(lines) + "\n```\n")


def reliability(run: dict[str, Any]) -> str:
    v = run["verdict"]
    body = (f"jobs {v['jobs']}, faults {v['faults']} ({_kinds(v['faults_by_kind'])}), "
            f"{v['faults_effective']} effective; launches {v['launches']}, "
            + ", ".join(f"{k} {v[k]}" for k in ZEROS if k in v)
            + f", retried_by_hand {v['retried_by_hand']}, min_release_margin_s "
            f"{v['min_release_margin_s']:.3f}, {v['wall_s']:.0f} s; ok {str(v['ok']).lower()}")
    return (f"Last long run (commit {run['commit']}, {run['date']}):\n\n```\n"
            + textwrap.fill(body, 96) + "\n```\n")


RENDER: dict[str, Callable[[dict[str, Any]], str]] = {
    "readme": readme, "testing": testing, "reliability": reliability}


def render(text: str, run: dict[str, Any]) -> str:
    def one(match: re.Match[str]) -> str:
        return match.group(1) + RENDER[match.group("name")](run) + match.group(4)
    return BLOCK.sub(one, text)


def blocks(text: str) -> dict[str, str]:
    return {m.group("name"): m.group("body") for m in BLOCK.finditer(text)}


def main() -> None:
    verdict = json.loads(Path(sys.argv[1]).read_text())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    seed = verdict.get("seed", int(sys.argv[2]) if len(sys.argv) > 2 else None)
    run = {"commit": commit, "date": time.strftime("%Y-%m-%d"), "seed": seed,
           "verdict": verdict}
    RECORD.write_text(json.dumps(run, indent=1) + "\n")
    for name in DOCS:
        path = ROOT / name
        path.write_text(render(path.read_text(), run))
    print(f"chaos figures: {RECORD.relative_to(ROOT)} and {', '.join(DOCS)}")


if __name__ == "__main__":
    main()
