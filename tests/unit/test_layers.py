"""Layering rules that ARCHITECTURE promises: cli -> front ends -> engine -> hosts -> manifest ->
sim, errors (the import contract in pyproject.toml), checked both statically (lint-imports) and
by what an import really loads."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def loaded_after(imports: str) -> set[str]:
    """The eq_tui packages and the UI/ssh libraries a fresh interpreter holds after `imports`."""
    code = (f"import sys; {imports}; print('\\n'.join(m for m in sys.modules "
            "if m.startswith(('eq_tui.', 'textual', 'asyncssh'))))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    return set(out.split())


def packages(modules: set[str]) -> set[str]:
    return {m if not m.startswith("eq_tui.") else ".".join(m.split(".")[:2]) for m in modules}


def test_engine_does_not_import_textual() -> None:
    code = ("import eq_tui.engine, eq_tui.engine.engine, eq_tui.cli.headless, sys; "
            "assert 'textual' not in sys.modules, 'the engine imported textual'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_eq_tui_help_loads_only_the_main_commands_parser() -> None:
    """`eq-tui --help` is read by people: it imports no verb's module, no engine, no manifest
    loader and no asyncio (with every verb imported first it took 2.5x as long)."""
    code = ("import sys\nfrom eq_tui.cli.main import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\n"
            "print(' '.join(m for m in sys.modules if m.startswith(('eq_tui', 'asyncio'))))")
    loaded = set(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                text=True).stdout.split())
    assert "eq_tui.cli.run" in loaded
    heavy = {m for m in loaded if m.startswith(("asyncio", "eq_tui.api", "eq_tui.manifest",
                                                 "eq_tui.engine", "eq_tui.results"))}
    assert not heavy, heavy
    assert not loaded & {"eq_tui.cli.attach", "eq_tui.cli.results", "eq_tui.cli.queue_verbs"}


def test_cli_help_does_not_import_the_ui() -> None:
    code = ("import sys; from eq_tui.cli.main import parsers; parsers(); "
            "assert 'textual' not in sys.modules and 'asyncssh' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_manifest_stands_on_its_own() -> None:
    loaded = packages(loaded_after("import eq_tui.manifest, eq_tui.manifest.loader, "
                                   "eq_tui.manifest.ssh_target, eq_tui.manifest.ids"))
    assert "eq_tui.manifest" in loaded
    assert not loaded & {"eq_tui.engine", "eq_tui.hosts", "textual", "asyncssh"}, loaded


def test_hosts_do_not_import_the_engine() -> None:
    loaded = packages(loaded_after(
        "import eq_tui.hosts.factory, eq_tui.hosts.shell_host, eq_tui.hosts.slurm, "
        "eq_tui.hosts.ssh, eq_tui.hosts.local, eq_tui.hosts.watch"))
    assert {"eq_tui.hosts", "eq_tui.manifest", "asyncssh"} <= loaded
    assert not loaded & {"eq_tui.engine", "textual"}, loaded


@pytest.mark.parametrize("front_end", [
    "eq_tui.cli.status_report", "eq_tui.cli.remote.target", "eq_tui.cli.remote.link",
    "eq_tui.cli.remote.start", "eq_tui.cli.remote.status", "eq_tui.cli.remote.on_host",
    "eq_tui.cli.detach", "eq_tui.cli.dry_run", "eq_tui.cli.status", "eq_tui.cli.stop"])
def test_front_ends_without_a_screen_do_not_import_textual(front_end: str) -> None:
    loaded = packages(loaded_after(f"import {front_end}"))
    assert "textual" not in loaded, loaded


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint is not None, "lint-imports is missing: .ci/setup installs it (dev extra)"
    return subprocess.run([lint, "--no-cache", "--config", str(cwd / "pyproject.toml")],
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(cwd)},
                          capture_output=True, text=True)


def test_the_import_contract_holds_and_catches_a_reversed_import(tmp_path: Path) -> None:
    kept = lint_imports(ROOT)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    shutil.copytree(ROOT / "eq_tui", tmp_path / "eq_tui",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    base = tmp_path / "eq_tui" / "hosts" / "base.py"
    base.write_text(base.read_text() + "\nimport eq_tui.engine  # reversed: hosts -> engine\n")
    broken = lint_imports(tmp_path)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "eq_tui.hosts is not allowed to import eq_tui.engine" in broken.stdout
    assert "eq_tui.hosts.base -> eq_tui.engine" in broken.stdout
def test_nothing_in_the_ui_imports_the_app_back() -> None:
    """The app imports its widgets and helpers; none of them imports the app (no cycle: the
    palette's commands come from EqTuiApp.get_system_commands). Only launch.py, which runs
    the app, may."""
    import ast
    from pathlib import Path

    tui = Path(__file__).resolve().parent.parent.parent / "eq_tui" / "tui"
    offenders = []
    for path in tui.rglob("*.py"):
        if path.parent == tui and path.name in ("app.py", "launch.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if "eq_tui.tui.app" in names:
                offenders.append(str(path.relative_to(tui)))
    assert offenders == [], f"these import eq_tui.tui.app: {offenders}"


def test_a_jobs_spec_is_read_from_the_ledger_only() -> None:
    """The ledger's specs are the one source of a job's spec: the manifest's `job_specs` are
    the file as it was at start, and know nothing of clones, adds, reloads and edits."""
    readers = [f"{path.relative_to(ROOT)}:{n}"
               for path in sorted((ROOT / "eq_tui").rglob("*.py"))
               if path.parent.name != "manifest" and path.name != "ledger.py"
               for n, line in enumerate(path.read_text().splitlines(), 1)
               if "manifest.job_specs.get(" in line or "manifest.job_specs[" in line]
    assert readers == []


def _runtime_graph() -> dict[str, set[str]]:
    """eq_tui's modules and the eq_tui modules each imports at run time (TYPE_CHECKING
    blocks aside)."""
    import grimp

    graph = grimp.build_graph("eq_tui", exclude_type_checking_imports=True, cache_dir=None)
    return {m: {i for i in graph.find_modules_directly_imported_by(m)
                if i.startswith("eq_tui")} for m in graph.modules}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_back() -> None:
    graph = _runtime_graph()
    assert _cycles(graph) == []
    # the check sees a cycle when there is one
    assert _cycles({**graph, "eq_tui.errors": {"eq_tui.cli.main"}}) != []


def test_at_most_three_loose_modules_at_the_top() -> None:
    loose = sorted(p.name for p in (ROOT / "eq_tui").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "errors.py"]


def test_front_ends_reach_the_engine_only_through_the_contract() -> None:
    """Front ends (cli, tui, notify) import eq_tui.api; two modules import the engine's own:
    cli/run.py, which builds and runs an Engine, and cli/dry_run.py, which plans with its
    scheduler without running it."""
    graph = _runtime_graph()
    front = ("eq_tui.cli", "eq_tui.tui", "eq_tui.notify")
    importers = sorted(m for m, imported in graph.items() if m.startswith(front)
                       and any(i == "eq_tui.engine" or i.startswith("eq_tui.engine.")
                               for i in imported))
    assert importers == ["eq_tui.cli.dry_run", "eq_tui.cli.run"]


def test_every_verb_is_found_from_its_name() -> None:
    """The CLI's table names each verb's module: `eq-tui VERB` runs eq_tui/cli/VERB.py (dashes
    as underscores), and the queue verbs, one family, eq_tui/cli/queue_send.py."""
    from eq_tui.cli.main import VERBS
    from eq_tui.cli.queue_verb_names import VERBS as QUEUE_VERBS

    for name, verb in VERBS.items():
        where = verb.parser_at if name in QUEUE_VERBS or name == "completion" else verb.run_at
        expected = "queue_verbs" if name in QUEUE_VERBS else name.replace("-", "_")
        assert where.partition(":")[0] == expected, (name, where)
        assert callable(verb.parser) and verb.parser(name).prog == f"eq-tui {name}"


def test_modules_and_classes_stay_small() -> None:
    """≤ 450 lines a module, ≤ 30 methods a class."""
    import ast

    long_modules, big_classes = [], []
    for path in sorted((ROOT / "eq_tui").rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > 450:
            long_modules.append(str(path.relative_to(ROOT)))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                methods = [n for n in node.body
                           if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
                if len(methods) > 30:
                    big_classes.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert long_modules == [] and big_classes == []


def test_only_the_ledger_writes_a_jobs_or_an_attempts_fields() -> None:
    """docs/architecture.md: 'Only the ledger writes a job's or an attempt's fields': every
    field of JobState and Attempt, by assignment, setattr, a mutating call, one of their own
    writing methods, or through another name (tests/support/field_writes.py; its own tests in
    tests/unit/test_field_writes.py)."""
    from tests.support.field_writes import writes_outside

    assert [str(w) for w in writes_outside(ROOT, "eq_tui/engine/state/ledger.py")] == []


def test_the_run_manifest_is_replaced_in_one_place() -> None:
    """One manifest object, RunContext's (the ledger keeps none): replaced by
    RunContext.replace_manifest only (secrets, early stopping edited or reloaded)."""
    import ast

    writers = []
    for path in sorted((ROOT / "eq_tui" / "engine").rglob("*.py")):
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
                writers += [f"{path.relative_to(ROOT)}:{function.name}" for target in targets
                            if isinstance(target, ast.Attribute) and target.attr == "manifest"]
    assert writers == ["eq_tui/engine/context.py:replace_manifest"]


def test_command_handlers_get_a_door_not_the_engine() -> None:
    """The handlers are handed the run's state and a Door (engine/commands/door.py); none
    imports the Engine, even for type checking."""
    import ast

    importers = []
    for path in sorted((ROOT / "eq_tui" / "engine" / "commands").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "") == "eq_tui.engine.engine":
                importers.append(path.name)
            if isinstance(node, ast.Import) and any(
                    alias.name == "eq_tui.engine.engine" for alias in node.names):
                importers.append(path.name)
    assert importers == []


def test_the_tick_runs_its_phases_in_the_order_the_architecture_says() -> None:
    import ast
    import re

    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc[doc.index("## One tick, from probe to publish"):]
    said = re.findall(r"`([a-z_.]+)`", section[:section.index("1. **Ask**")])
    source = (ROOT / "eq_tui" / "engine" / "engine.py").read_text()
    tick = next(node for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.AsyncFunctionDef) and node.name == "tick")
    calls = []
    for node in ast.walk(tick):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func).removeprefix("self.")
            if name.count(".") <= 1 and not name.startswith(("ctx", "pacing", "lock")):
                calls.append((node.lineno, node.col_offset, name))
    done = [name for _, _, name in sorted(calls)]
    order = [name for name in done if name in said]
    assert order == said, (order, said)


def test_the_cli_imports_the_ui_only_where_it_starts_it_lazily() -> None:
    """The CLI reads no UI module (`--filter` parses with eq_tui.present.job_filter): only
    cli/attach.py and cli/run.py import eq_tui.tui, and only inside the function that starts
    the app (or for type checking), so a verb without a screen never loads Textual."""
    import ast

    starts = {("eq_tui/cli/attach.py", "eq_tui.tui.app"),
              ("eq_tui/cli/run.py", "eq_tui.tui.launch")}
    offenders = []
    for path in sorted((ROOT / "eq_tui" / "cli").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text())
        lazy = {id(node) for function in ast.walk(tree)
                if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
                for node in ast.walk(function)}
        typing_only = {id(node) for block in ast.walk(tree)
                       if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
                       for node in ast.walk(block)}
        for node in ast.walk(tree):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                if name != "eq_tui.tui" and not name.startswith("eq_tui.tui."):
                    continue
                if id(node) in typing_only or (id(node) in lazy and (where, name) in starts):
                    continue
                offenders.append(f"{where}:{node.lineno} {name}")
    assert offenders == []
