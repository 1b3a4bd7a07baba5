"""The mutation scores in docs/testing.md are current: each is for the module's bytes as they are.

bench/mutation.py records, per module (and bench/shell_mutation.py per host script,
eq_tui/hosts/scripts/*.sh, in the same record), the git blob hash of the file it scored
(bench/results/mutation_scores.json). A module edited since fails here until it is scored
again; the docs table must be the one the record gives; every score must be at least
MIN_SCORE; every surviving mutant must be named in docs/testing.md, where the argument for it
stands (no mutant becomes "equivalent" without one). The blob hash is computed from the
file's bytes as git does, so this needs no git history.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "bench" / "results" / "mutation_scores.json"
DOCS = ROOT / "docs" / "testing.md"
MIN_SCORE = 0.85
# the host scripts where claims, fair turns, the lab's rules at launch, drain waits and the
# launch itself live (issue 42): over their mutants less the survivors argued equivalent
MIN_SCRIPT_SCORE = 0.90


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_mutation", ROOT / "bench" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _bench()
SCORES: dict[str, dict[str, object]] = json.loads(RECORD.read_text())["modules"]


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_the_blob_hash_is_the_one_git_prints() -> None:
    # `printf 'hello\n' | git hash-object --stdin`
    assert git_blob(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert BENCH.blob_hash(b"hello\n") == git_blob(b"hello\n")


SCORED = {*BENCH.MODULES, *BENCH.shell_mutation.SCRIPTS}


def test_every_module_bench_mutation_scores_has_a_score() -> None:
    missing = sorted(SCORED - set(SCORES))
    assert not missing, (f"never scored: {missing}; run `.venv/bin/python bench/mutation.py "
                         f"{' '.join(missing)}`")
    assert sorted(SCORES) == sorted(SCORED), "the record names files MODULES and SCRIPTS lack"


@pytest.mark.parametrize("module", sorted(SCORES))
def test_a_scored_module_is_unchanged_since_its_score(module: str) -> None:
    entry = SCORES[module]
    path = ROOT / module
    assert path.exists(), (f"{module} is gone: update MODULES in bench/mutation.py and run "
                           "`.venv/bin/python bench/mutation.py --stale`")
    assert git_blob(path.read_bytes()) == entry["blob"], (
        f"{module} changed after its mutation score (scored at commit {entry['commit']}, "
        f"blob {entry['blob']}): run `.venv/bin/python bench/mutation.py {module}` to re-score "
        "it, then argue or kill its survivors in docs/testing.md")


@pytest.mark.parametrize("module", sorted(SCORES))
def test_a_score_is_its_counts_and_at_least_the_floor(module: str) -> None:
    entry = SCORES[module]
    mutants, killed = int(str(entry["mutants"])), int(str(entry["killed"]))
    surviving = entry["surviving"]
    assert isinstance(surviving, list)
    # a mutant no test runs is a survivor, never left out of the score
    assert killed + int(str(entry["survivors"])) == mutants == killed + len(surviving)
    assert int(str(entry["no_tests"])) <= len(surviving)
    assert entry["score"] == round(killed / mutants, 4)
    if module.endswith(".sh"):
        # a host script is held to its mutants less the survivors argued equivalent (each
        # named in docs/testing.md, as every survivor is)
        mutants -= len(BENCH.shell_mutation.equivalent(module, entry))
        assert killed / mutants >= MIN_SCRIPT_SCORE, (
            f"{module} scores {killed / mutants:.1%} of its mutants less the equivalent ones")
    assert killed / mutants >= MIN_SCORE, f"{module} scores {killed / mutants:.1%}"


def test_the_docs_table_is_the_records() -> None:
    text = DOCS.read_text()
    start = text.index(BENCH.TABLE_START) + len(BENCH.TABLE_START)
    shown = text[start:text.index(BENCH.TABLE_END)].strip()
    assert shown == BENCH.table(SCORES), (
        "docs/testing.md's score table differs from bench/results/mutation_scores.json: "
        "run `.venv/bin/python bench/mutation.py --table`")


def test_every_survivor_is_named_in_the_docs_with_its_module() -> None:
    """docs/testing.md lists each surviving mutant by its mutmut name (without the module
    prefix) under its module's heading, next to the argument why no test can kill it."""
    text = DOCS.read_text()
    unnamed = []
    for module, entry in SCORES.items():
        heading = f"\n#### `{module}`\n"
        section = text.split(heading, 1)[1].split("\n#", 1)[0] if heading in text else ""
        surviving = entry["surviving"]
        assert isinstance(surviving, list)
        for name in surviving:
            short = BENCH.short_name(module, name)
            if f"`{short}`" not in section:
                unnamed.append(f"{module}: {short}")
    assert not unnamed, f"surviving mutants with no argument in docs/testing.md: {unnamed}"
