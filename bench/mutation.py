"""Mutation score of the pure core (mutmut), module by module, with only its fast unit tests.

    .venv/bin/python bench/mutation.py                       # every module in MODULES
    .venv/bin/python bench/mutation.py eq_tui/engine/tick/judge.py --jobs 2
    .venv/bin/python bench/mutation.py --list

Not part of CI (minutes per module). Each module runs in its own copy of the checkout (mutmut
writes a `mutants/` tree), so the working tree is left alone; the copies go once scored unless
--keep. Prints one JSON line per module: mutants, killed, survived, timeouts, no tests, score
(killed + timeouts over the mutants that some test runs), and the surviving mutants' names;
`--diff` adds each survivor's diff. docs/testing.md records the scores and what survives.

MODULES is the list to edit when code moves between modules: a module path, and the unit tests
that cover it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTMUT_VERSION = "3.8.1"

_MANIFEST = [
    "tests/unit/manifest/test_manifest.py",
    "tests/unit/manifest/test_manifest_loader.py",
]
MODULES: dict[str, list[str]] = {
    "eq_tui/engine/tick/classify.py": [
        "tests/unit/test_classify.py",
    ],
    "eq_tui/engine/tick/judge.py": [
        "tests/unit/test_judge.py",
    ],
    "eq_tui/engine/decide/scheduler.py": [
        "tests/unit/test_scheduler.py",
        "tests/unit/test_scheduler_reference.py",
        "tests/unit/test_packing_rules.py",
    ],
    "eq_tui/engine/decide/placement.py": [
        "tests/unit/test_scheduler.py",
        "tests/unit/test_scheduler_reference.py",
        "tests/unit/test_packing_rules.py",
    ],
    "eq_tui/engine/decide/packing.py": [
        "tests/unit/test_packing_rules.py",
        "tests/unit/test_scheduler.py",
        "tests/unit/test_scheduler_reference.py",
    ],
    "eq_tui/runfiles/journal.py": [
        "tests/unit/test_journal.py",
        "tests/unit/test_statefile.py",
    ],
    "eq_tui/runfiles/statefile.py": [
        "tests/unit/test_statefile.py",
        "tests/unit/test_journal.py",
    ],
    "eq_tui/manifest/expand.py": [
        "tests/unit/test_expand.py",
        *_MANIFEST,
    ],
    "eq_tui/manifest/jobs.py": [
        *_MANIFEST,
        "tests/unit/manifest/test_manifest_sharing.py",
        "tests/unit/manifest/test_manifest_watch.py",
        "tests/unit/manifest/test_manifest_results.py",
    ],
    "eq_tui/manifest/phases.py": _MANIFEST,
    "eq_tui/manifest/hosts.py": [
        "tests/unit/manifest/test_manifest_hosts.py",
        "tests/unit/manifest/test_manifest_sharing.py",
        *_MANIFEST,
    ],
    "eq_tui/manifest/schema.py": [
        *_MANIFEST,
        "tests/unit/test_json_schema.py",
    ],
    "eq_tui/manifest/settings.py": _MANIFEST,
    "eq_tui/manifest/sharing.py": [
        "tests/unit/manifest/test_manifest_sharing.py",
        "tests/unit/manifest/test_manifest.py",
    ],
    "eq_tui/manifest/loader.py": [
        *_MANIFEST,
        "tests/unit/manifest/test_manifest_sharing.py",
    ],
    "eq_tui/manifest/yaml_lines.py": _MANIFEST,
}
# Property tests run once per mutant that their functions touch: fewer examples keep a module
# within minutes; a mutant they would catch only at the 50th example is rare.
HYPOTHESIS_EXAMPLES = "30"
KILLED = ("killed", "timeout")


def ensure_mutmut() -> Path:
    exe = Path(sys.executable).parent / "mutmut"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                        f"mutmut=={MUTMUT_VERSION}"], check=True)
    return exe


def prepare(module: str, tests: list[str]) -> Path:
    """A copy of the checkout whose setup.cfg points mutmut at `module` and `tests`."""
    work = Path(tempfile.mkdtemp(prefix="eq-mutation-"))
    data = ("themes", "sample_manifests", "docs")  # files the tests read
    for name in ("eq_tui", "tests", *data):
        shutil.copytree(ROOT / name, work / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
    selection = "\n    ".join(tests)
    (work / "setup.cfg").write_text(
        "[mutmut]\nsource_paths = eq_tui\n"
        f"only_mutate = {module}\n"
        # mutmut runs the tests from its own mutants/ tree, which gets only what is listed
        "also_copy =\n    " + "\n    ".join(data) + "\n"
        f"pytest_add_cli_args_test_selection =\n    {selection}\n"
        "pytest_add_cli_args =\n    -p\n    no:xdist\n    -p\n    no:cacheprovider\n"
        "    -p\n    no:randomly\n")
    return work


def counts(text: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"\s+(\S+): (\w[\w ]*)$", line)
        if match:
            found[match[2]] = found.get(match[2], 0) + 1
    return found


def score(module: str, tests: list[str], *, jobs: int, keep: bool, diff: bool) -> dict[str, object]:
    mutmut = ensure_mutmut()
    work = prepare(module, tests)
    env = dict(os.environ, EQ_HYPOTHESIS_EXAMPLES=HYPOTHESIS_EXAMPLES)
    try:
        run = subprocess.run([str(mutmut), "run", "--max-children", str(jobs)], cwd=work,
                             env=env, capture_output=True, text=True)
        if run.returncode != 0:
            return {"module": module, "error": (run.stdout + run.stderr)[-2000:]}
        listing = subprocess.run([str(mutmut), "results", "--all", "true"], cwd=work, env=env,
                                 capture_output=True, text=True, check=True).stdout
        by_status = counts(listing)
        survivors = [m[1] for m in re.finditer(r"\s+(\S+): survived", listing)]
        total = sum(by_status.values())
        tested = total - by_status.get("no tests", 0)
        killed = sum(by_status.get(s, 0) for s in KILLED)
        report: dict[str, object] = {
            "module": module, "tests": tests, "mutants": total, "by_status": by_status,
            "score": round(killed / tested, 3) if tested else None, "survivors": survivors}
        if diff:
            report["diffs"] = {name: subprocess.run(
                [str(mutmut), "show", name], cwd=work, env=env, capture_output=True,
                text=True).stdout for name in survivors}
        return report
    finally:
        if keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="module paths (default: all of MODULES)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested at once")
    parser.add_argument("--keep", action="store_true", help="keep each module's copy")
    parser.add_argument("--diff", action="store_true", help="include the survivors' diffs")
    parser.add_argument("--list", action="store_true", help="print MODULES and exit")
    args = parser.parse_args()
    if args.list:
        for module, tests in MODULES.items():
            print(module, " ".join(tests))
        return
    for module in args.modules or list(MODULES):
        if module not in MODULES:
            parser.error(f"{module} is not in MODULES (bench/mutation.py): add it with its tests")
        print(json.dumps(score(module, MODULES[module], jobs=args.jobs, keep=args.keep,
                               diff=args.diff)), flush=True)


if __name__ == "__main__":
    main()
