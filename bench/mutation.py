"""Mutation score of the pure core (mutmut), module by module, with only its fast unit tests.

    .venv/bin/python bench/mutation.py eq_tui/engine/tick/judge.py   # re-score one module
    .venv/bin/python bench/mutation.py --stale       # every module changed since its score
    .venv/bin/python bench/mutation.py               # every module in MODULES (long)
    .venv/bin/python bench/mutation.py --list

Not part of CI (minutes per module). Each module runs in its own copy of the checkout (mutmut
writes a `mutants/` tree), so the working tree is left alone; the copies go once scored unless
--keep. Prints one JSON line per module: mutants, killed (timeouts included), survivors (every
mutant not killed, those no test runs included), no tests, score (killed over all mutants),
the commit and the module's git blob hash, and the surviving mutants' names; `--diff` adds each
survivor's diff.

Each score is written to bench/results/mutation_scores.json (the record) and the table in
docs/testing.md is rewritten from it (`--no-record` leaves both alone). The record holds each
module's blob hash: tests/unit/test_mutation_scores.py fails when a scored module's bytes
differ from the ones scored, and names the command that re-scores it.

MODULES is the list to edit when code moves between modules: a module path, and the unit tests
that cover it.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import shell_mutation  # the host scripts: SCRIPTS, scored by it

ROOT = Path(__file__).resolve().parent.parent
MUTMUT_VERSION = "3.8.1"

_MANIFEST = [
    "tests/unit/manifest/test_manifest.py",
    "tests/unit/manifest/test_manifest_loader.py",
]
# the manifest tests (test_manifest_docs reads README.md, which the copy lacks, and runs an
# engine); mutmut runs, per mutant, only those that call its function
_MANIFEST_ALL = [
    *_MANIFEST,
    "tests/unit/manifest/test_manifest_fail_fast.py",
    "tests/unit/manifest/test_manifest_hosts.py",
    "tests/unit/manifest/test_manifest_results.py",
    "tests/unit/manifest/test_manifest_sharing.py",
    "tests/unit/manifest/test_manifest_watch.py",
    "tests/unit/test_secrets.py",
    "tests/unit/test_json_schema.py",
    "tests/unit/test_expand.py",
    "tests/unit/manifest/test_checkpoint_keys.py",
    "tests/unit/manifest/test_search_keys.py",
    "tests/unit/test_preemption_rule.py",
]
MODULES: dict[str, list[str]] = {
    "eq_tui/engine/tick/classify.py": [
        "tests/unit/test_classify.py",
    ],
    "eq_tui/engine/tick/judge.py": [
        "tests/unit/test_judge.py",
        "tests/unit/test_oversize.py",
    ],
    "eq_tui/engine/decide/scheduler.py": [
        "tests/unit/test_scheduler.py",
        "tests/unit/test_scheduler_reference.py",
        "tests/unit/test_packing_rules.py",
        "tests/unit/test_oversize.py",
        "tests/unit/test_waiting_reasons.py",
    ],
    "eq_tui/engine/decide/placement.py": [
        "tests/unit/test_no_room.py",
        "tests/unit/test_scheduler.py",
        "tests/unit/test_scheduler_reference.py",
        "tests/unit/test_packing_rules.py",
    ],
    "eq_tui/engine/decide/packing.py": [
        "tests/unit/test_packing_rules.py",
        "tests/unit/test_scheduler.py",
        "tests/unit/test_scheduler_reference.py",
        "tests/unit/test_oversize.py",
        "tests/unit/test_waiting_reasons.py",
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
    "eq_tui/manifest/jobs.py": _MANIFEST_ALL,
    "eq_tui/manifest/phases.py": [*_MANIFEST, "tests/unit/manifest/test_search_keys.py"],
    "eq_tui/manifest/hosts.py": [
        "tests/unit/manifest/test_manifest_hosts.py",
        "tests/unit/manifest/test_manifest_sharing.py",
        *_MANIFEST,
    ],
    "eq_tui/manifest/schema.py": _MANIFEST_ALL,
    "eq_tui/manifest/settings.py": _MANIFEST_ALL,
    "eq_tui/manifest/sharing.py": [
        "tests/unit/manifest/test_manifest_sharing.py",
        "tests/unit/manifest/test_manifest.py",
    ],
    "eq_tui/manifest/loader.py": _MANIFEST_ALL,
    "eq_tui/manifest/preempt_keys.py": [
        "tests/unit/test_preemption_rule.py",
    ],
    "eq_tui/manifest/checkpoint_keys.py": [
        "tests/unit/manifest/test_checkpoint_keys.py",
        "tests/unit/test_preemption_rule.py",
    ],
    "eq_tui/manifest/search_keys.py": [
        "tests/unit/manifest/test_search_keys.py",
        "tests/unit/manifest/test_search_key_messages.py",
        "tests/unit/manifest/test_search_early_stop.py",
    ],
    "eq_tui/engine/tick/search_trials.py": [
        "tests/unit/test_search_trials.py",
        "tests/unit/test_search_trials_engine.py",
        "tests/unit/test_search_lock.py",
    ],
    "eq_tui/engine/tick/search_pruning.py": [
        "tests/unit/test_search_pruning.py",
        "tests/unit/test_early_stop_book.py",
    ],
    "eq_tui/runfiles/search_pruners.py": [
        "tests/unit/test_search_pruners.py",
    ],
    "eq_tui/manifest/search_early_stop.py": [
        "tests/unit/manifest/test_search_early_stop.py",
        "tests/unit/manifest/test_search_keys.py",
    ],
    "eq_tui/engine/tick/search_live.py": [
        "tests/unit/test_search_live.py",
        "tests/unit/test_search_trials_engine.py",
    ],
    "eq_tui/engine/state/search_edits.py": [
        "tests/unit/test_search_live.py",
        "tests/unit/test_search_trials_engine.py",
    ],
    "eq_tui/engine/commands/search_edit.py": [
        "tests/unit/test_search_live.py",
    ],
    "eq_tui/runfiles/search_curve.py": [
        "tests/unit/test_search_curve.py",
    ],
    "eq_tui/results/resumed.py": [
        "tests/unit/test_results_resumed.py",
    ],
    # test_checkpoint_files.py but its 2 s wait for a growing file
    "eq_tui/hosts/checkpoints.py": [
        "tests/unit/test_checkpoints_parse.py",
        "tests/integration/test_checkpoint_files.py::test_the_newest_complete_file_the_glob_matches",
        "tests/integration/test_checkpoint_files.py::"
        "test_a_working_directory_that_is_not_there_is_a_host_error",
        "tests/integration/test_checkpoint_files.py::"
        "test_no_working_directory_lists_where_the_runner_is_within_30_s",
        "tests/integration/test_checkpoint_files.py::"
        "test_names_and_errors_that_are_not_utf8_still_read",
    ],
    "eq_tui/manifest/yaml_lines.py": _MANIFEST_ALL,
    "eq_tui/engine/tick/memory.py": [
        "tests/unit/test_memory_book.py",
        "tests/unit/test_packing_rules.py",
        "tests/unit/test_waiting_reasons.py",
    ],
    "eq_tui/engine/decide/crash_guard.py": [
        "tests/unit/test_crash_guard_rules.py",
    ],
    # test_gpu_health.py runs engines and screen sessions: too slow to run per mutant
    "eq_tui/engine/tick/gpu_health.py": [
        "tests/unit/test_gpu_health_rules.py",
    ],
    "eq_tui/hosts/shell_protocol.py": [
        "tests/unit/test_probe_parse.py",
        "tests/unit/test_shell_protocol.py",
        "tests/unit/test_leftover_candidates.py",
        "tests/unit/test_fuzz.py",
    ],
    "eq_tui/hosts/gpu_csv.py": [
        "tests/unit/test_gpu_csv.py",
        "tests/unit/test_fuzz.py",
    ],
    "eq_tui/hosts/slurm_parse.py": [
        "tests/unit/test_slurm_parse.py",
    ],
    "eq_tui/engine/decide/preemption.py": [
        "tests/unit/test_preemption_rule.py",
    ],
    "eq_tui/engine/decide/pruning.py": [
        "tests/unit/test_early_stop_rule.py",
        "tests/unit/test_early_stop_book.py",
    ],
    "eq_tui/engine/tick/early_stop.py": [
        "tests/unit/test_early_stop_book.py",
        "tests/unit/test_early_stop_rule.py",
    ],
    "eq_tui/engine/tick/cost.py": [
        "tests/unit/test_cost.py",
        "tests/unit/test_cost_metering.py",
    ],
    "eq_tui/engine/tick/wants.py": [
        "tests/unit/test_wants.py",
    ],
    "eq_tui/api/job_progress.py": [
        "tests/unit/test_job_progress.py",
        "tests/unit/test_engine_progress.py",
        "tests/unit/test_stack_fixtures.py",
    ],
    "eq_tui/engine/tick/drain_launch.py": [
        "tests/unit/test_drain_launch_rules.py",
    ],
    "eq_tui/hosts/claims.py": [
        "tests/unit/test_claims_rules.py",
    ],
    # the pure tests of tests/integration/test_lab_rules.py (the rest run engines)
    "eq_tui/hosts/lab_rules.py": [
        "tests/unit/test_lab_rules_parse.py",
        "tests/integration/test_lab_rules.py::test_a_rules_file_reads_as_rules",
        "tests/integration/test_lab_rules.py::test_what_is_not_a_rule_says_where",
        "tests/integration/test_lab_rules.py::test_what_the_rules_keep_from_us_and_when",
    ],
    "eq_tui/manifest/added_jobs.py": [
        "tests/unit/manifest/test_added_jobs.py",
    ],
    "eq_tui/results/unseen.py": [
        "tests/unit/test_unseen_rule.py",
    ],
    # test_nvml.py but its engine run (too slow per mutant)
    "eq_tui/hosts/nvml.py": [
        "tests/unit/test_nvml_readings.py",
        "tests/unit/test_nvml.py::test_the_reader_turns_nvml_answers_into_readings",
        "tests/unit/test_nvml.py::test_a_read_that_fails_midway_is_a_warning_not_an_error",
        "tests/unit/test_nvml.py::test_on_a_shared_gpu_each_process_gets_its_own_utilisation",
        "tests/unit/test_nvml.py::test_the_reader_gives_each_card_its_power_and_energy_counter",
        "tests/unit/test_nvml.py::test_an_idle_h200_reads_as_nvidia_smi_prints_it_not_as_615_mib_used",
        "tests/unit/test_nvml.py::test_a_driver_without_the_second_memory_call_is_read_with_the_first_and_asked_once",
        "tests/unit/test_nvml.py::test_a_card_the_second_call_cannot_read_is_asked_the_first_without_giving_it_up",
        "tests/unit/test_nvml.py::test_no_driver_or_no_library_means_nvidia_smi",
        "tests/unit/test_nvml.py::test_a_local_host_reads_gpus_through_nvml_when_it_can",
        "tests/unit/test_nvml.py::test_a_local_probe_carries_the_nvml_readings",
        "tests/unit/test_nvml.py::test_each_process_carries_its_own_group_and_session_told_apart",
        "tests/unit/test_nvml.py::test_a_processs_utilisation_is_its_busiest_sample_in_the_window",
        "tests/unit/test_nvml.py::test_a_binding_without_the_power_calls_reads_no_power",
    ],
}
RECORD = ROOT / "bench" / "results" / "mutation_scores.json"
DOCS = ROOT / "docs" / "testing.md"
TABLE_START = "<!-- mutation-scores: generated by bench/mutation.py from its record -->"
TABLE_END = "<!-- /mutation-scores -->"
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


def blob_hash(data: bytes) -> str:
    """What `git hash-object` prints for these bytes (works without git or its history)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def head_commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()


def score(module: str, tests: list[str], *, jobs: int, keep: bool, diff: bool) -> dict[str, object]:
    mutmut = ensure_mutmut()
    blob = blob_hash((ROOT / module).read_bytes())
    commit = head_commit()
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
        # a mutant no test runs is a survivor: nothing would notice it
        survivors = [m[1] for m in re.finditer(r"\s+(\S+): (\w[\w ]*)$", listing, re.M)
                     if m[2] not in KILLED]
        total = sum(by_status.values())
        killed = sum(by_status.get(s, 0) for s in KILLED)
        report: dict[str, object] = {
            "module": module, "mutants": total, "killed": killed,
            "survivors": total - killed, "no_tests": by_status.get("no tests", 0),
            "score": round(killed / total, 4) if total else None, "commit": commit,
            "blob": blob, "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
            "tests": tests, "by_status": by_status, "surviving": survivors}
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


def short_name(module: str, mutant: str) -> str:
    """A mutant's mutmut name without its module: `xǁStateFileǁload__mutmut_12`."""
    prefix = module.removesuffix(".py").replace("/", ".") + "."
    return mutant.removeprefix(prefix)


def load_record() -> dict[str, dict[str, object]]:
    if not RECORD.exists():
        return {}
    modules: dict[str, dict[str, object]] = json.loads(RECORD.read_text())["modules"]
    return modules


RECORDED = ("commit", "date", "blob", "mutants", "killed", "survivors", "no_tests", "score",
            "surviving")


def save_record(modules: dict[str, dict[str, object]]) -> None:
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    record = {"mutmut": MUTMUT_VERSION, "hypothesis_examples": int(HYPOTHESIS_EXAMPLES),
              "modules": {name: modules[name] for name in sorted(modules)}}
    RECORD.write_text(json.dumps(record, indent=1) + "\n")


def percent(score: object) -> str:
    return f"{100 * float(score):.1f} %" if isinstance(score, (int, float)) else "-"


def table(modules: dict[str, dict[str, object]]) -> str:
    """The docs table: one row per scored module, in MODULES order."""
    rows = ["| module | mutants | score | survivors (no tests) | scored at |",
            "|---|---|---|---|---|"]
    order = [*MODULES, *shell_mutation.SCRIPTS]
    for name in sorted(modules, key=lambda m: (order.index(m) if m in order else len(order),
                                               m)):
        entry = modules[name]
        rows.append(f"| `{name}` | {entry['mutants']} | **{percent(entry['score'])}**"
                    f"{shell_mutation.less_equivalent(name, entry)} | "
                    f"{entry['survivors']} ({entry['no_tests']}) | "
                    f"{entry['commit']} ({entry['date']}) |")
    return "\n".join(rows)


def write_docs(modules: dict[str, dict[str, object]]) -> None:
    text = DOCS.read_text()
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    DOCS.write_text(text[:start] + "\n" + table(modules) + "\n" + text[end:])


def record(report: dict[str, object]) -> None:
    """Put one module's score in the record and the docs table (read afresh: others may run)."""
    modules = load_record()
    modules[str(report["module"])] = {key: report[key] for key in RECORDED}
    save_record(modules)
    write_docs(modules)


def stale() -> list[str]:
    """Modules in MODULES never scored, or whose bytes differ from the ones scored."""
    modules = load_record()
    return [name for name in [*MODULES, *shell_mutation.SCRIPTS] if name not in modules
            or modules[name]["blob"] != blob_hash((ROOT / name).read_bytes())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="module paths (default: all of MODULES)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants tested at once")
    parser.add_argument("--keep", action="store_true", help="keep each module's copy")
    parser.add_argument("--diff", action="store_true", help="include the survivors' diffs")
    parser.add_argument("--list", action="store_true", help="print MODULES and exit")
    parser.add_argument("--stale", action="store_true",
                        help="score the modules changed since their score (or never scored)")
    parser.add_argument("--no-record", action="store_true",
                        help="print only: leave the record and docs/testing.md alone")
    parser.add_argument("--table", action="store_true",
                        help="rewrite the docs table from the record and exit")
    parser.add_argument("--rerun-survivors", action="store_true",
                        help="a host script's recorded survivors only, run again against the "
                             "tests as they are now (tests added since), and recorded")
    args = parser.parse_args()
    if args.list:
        for module, tests in MODULES.items():
            print(module, " ".join(tests))
        return
    if args.table:
        write_docs(load_record())
        return
    for module in args.modules or (stale() if args.stale else list(MODULES)):
        if module in shell_mutation.SCRIPTS and args.rerun_survivors:
            report = shell_mutation.rerun_survivors(module, load_record()[module])
        elif module in shell_mutation.SCRIPTS:
            report = shell_mutation.score(module, shell_mutation.SCRIPTS[module],
                                          keep=args.keep, diff=args.diff)
        elif module not in MODULES:
            parser.error(f"{module} is not in MODULES (bench/mutation.py): add it with its tests")
        else:
            report = score(module, MODULES[module], jobs=args.jobs, keep=args.keep,
                           diff=args.diff)
        if "error" not in report and not args.no_record:
            record(report)
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
