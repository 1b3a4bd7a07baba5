"""`bench/` uses the contract package (eq_tui.api) or declares what it reaches into: every
eq_tui module a bench script imports from outside eq_tui.api is a key of BENCH_REACHES_INTO,
with why; a script that imports an undeclared engine internal fails here, and so does a
declaration no script needs any more."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"

_RUNS_AN_ENGINE = ("builds and runs an Engine on its own hosts, as cli/run.py does (the bench "
                   "measures the engine itself: ticks, reuse gaps, probes, early stopping)")
_SIM_TRUTH = ("the simulator's own records (runs.jsonl, health, energy): the ground truth a "
              "bench judges the engine by, which the engine does not write")
_RESULTS = "the results pipeline the bench times (parsing logs, records, grouping, tables)"
BENCH_REACHES_INTO: dict[str, str] = {
    "eq_tui": "the package's path: the bench checks it imported this checkout's eq_tui",
    "eq_tui.engine.engine": _RUNS_AN_ENGINE,
    "eq_tui.engine.decide.scheduler": "bench/scale.py times one scheduling decision at scale",
    "eq_tui.engine.tick.memory": "bench/scale.py builds the MemoryPlan the scheduler is given",
    "eq_tui.hosts.factory": "the hosts of a manifest for that Engine, and a sim host's state dir",
    "eq_tui.hosts.base": "bench/ssh_probe.py times one probe (ProbeRequest) of a host",
    "eq_tui.hosts.shell_host": "bench/ssh_probe.py times a ShellHost's probe over ssh",
    "eq_tui.hosts.ssh": "bench/ssh_probe.py times the SshRunner's connection",
    "eq_tui.manifest.loader": "the bench's own manifest, loaded as a run would",
    "eq_tui.manifest.model": "manifests built in code (jobs, hosts, early stopping specs)",
    "eq_tui.sim.state": _SIM_TRUTH,
    "eq_tui.results.group": _RESULTS,
    "eq_tui.results.records": _RESULTS,
    "eq_tui.results.parse": _RESULTS,
    "eq_tui.results.settings": _RESULTS,
    "eq_tui.runfiles.atomic": "bench/results.py writes its results.jsonl as a run writes it",
    "eq_tui.present.pace": "bench/eta.py scores the ETA a front end shows (PaceBook)",
    "eq_tui.present.queue_eta": "bench/eta.py scores the queue's ETA",
    "eq_tui.cli.results": "bench/results.py times `eq-tui results`' table",
    "eq_tui.tui.app": "bench/ui.py and bench/results.py time the UI itself (EqTuiApp)",
    "eq_tui.tui.screens.help": "bench/results.py times the help screen",
    "eq_tui.tui.screens.results": "bench/results.py times the results screen and its table",
}
# imported for their paths only (no eq_tui code): checked to stay so
IMPORT_NO_EQ_TUI = ("mutation.py", "shell_mutation.py")


def eq_tui_imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [(node.lineno, name) for name in names
                  if name == "eq_tui" or name.startswith("eq_tui.")]
    return found


def undeclared(bench: Path, declared: dict[str, str]) -> list[str]:
    return [f"{path.name}:{line} {module}" for path in sorted(bench.glob("*.py"))
            for line, module in eq_tui_imports(path)
            if module != "eq_tui.api" and not module.startswith("eq_tui.api.")
            and module not in declared]


def test_bench_imports_only_the_contract_or_what_it_declares() -> None:
    assert undeclared(BENCH, BENCH_REACHES_INTO) == []


def test_every_declaration_is_still_needed() -> None:
    used = {module for path in BENCH.glob("*.py") for _, module in eq_tui_imports(path)}
    assert sorted(set(BENCH_REACHES_INTO) - used) == []


def test_the_mutation_benches_import_no_eq_tui_code() -> None:
    assert [m for name in IMPORT_NO_EQ_TUI for m in eq_tui_imports(BENCH / name)] == []


def test_an_undeclared_engine_internal_is_caught(tmp_path: Path) -> None:
    (tmp_path / "new.py").write_text("from eq_tui.api.model import JobState\n"
                                     "from eq_tui.engine.state.ledger import Ledger\n"
                                     "import eq_tui.engine.tick.judge\n")
    assert undeclared(tmp_path, BENCH_REACHES_INTO) == [
        "new.py:2 eq_tui.engine.state.ledger", "new.py:3 eq_tui.engine.tick.judge"]
