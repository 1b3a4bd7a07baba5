"""Who writes a job's or an attempt's fields (api/model.py's JobState and Attempt), read from the
code: `x.field = ...` (also augmented, annotated, in a tuple, `del`), `setattr(x, ...)`,
`x.field[k] = ...`, `x.field.append(...)` and the other mutating calls, a call of one of the
dataclasses' own methods that writes its fields (`attempt.close`, `job.change_cmd`), and all of
these through another name (`current = job.current; current.exit_code = 3`,
`edits = job.edits; edits.append(...)`).

Other classes share the field names (a host's `reason`, an entry's `progress`), so `x` counts
only where the code says it is a job or an attempt: annotated so (a parameter, `x: JobState`),
made by JobState/Attempt(...) or `from_json`, a job's `.current`/`.placed`/`.history[i]`,
`*.jobs[k]`/`.get(k)`/`.pop(k)`, a loop or comprehension over `*.jobs.values()`, a job's
`history` or a name so annotated, `next(...)` of such a generator, `replace(job, ...)`, or the
result of a function whose return annotation names them. The code is fully annotated (mypy's
disallow_untyped_defs), so every job a function is handed is seen."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path

from eq_tui.api.model import Attempt, JobState

TYPES = frozenset({"JobState", "Attempt"})
FIELDS = frozenset(f.name for cls in (JobState, Attempt) for f in fields(cls))
MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "update",
                      "setdefault", "popitem", "sort", "reverse", "add", "discard"})
WRAPPERS = frozenset({"sorted", "list", "tuple", "set", "reversed", "iter", "filter",
                      "enumerate", "zip"})
CONTAINERS = frozenset({"list", "tuple", "set", "frozenset", "dict", "Iterable", "Iterator",
                        "Sequence", "Mapping", "MutableMapping", "Collection", "ValuesView",
                        "Generator", "deque"})
ONE, MANY, FIELD = "one", "many", "field"  # a job/attempt; several; one of its fields' values


@dataclass(frozen=True)
class Write:
    where: str  # path:line
    code: str

    def __str__(self) -> str:
        return f"{self.where}: {self.code}"


def _annotation_kind(node: ast.expr | None) -> str | None:
    if node is None:
        return None
    text = ast.unparse(node)
    if not any(name in text for name in TYPES):
        return None
    head = node.value if isinstance(node, ast.Subscript) else None
    name = head.attr if isinstance(head, ast.Attribute) else \
        head.id if isinstance(head, ast.Name) else None
    return MANY if name in CONTAINERS else ONE


def writing_methods(model: ast.Module) -> frozenset[str]:
    """The dataclasses' own methods that write their fields: a call of one is a write."""
    names = set()
    for cls in model.body:
        if isinstance(cls, ast.ClassDef) and cls.name in TYPES:
            for method in cls.body:
                if isinstance(method, ast.FunctionDef) and any(
                        isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                        for node in ast.walk(method) if isinstance(node, ast.Assign | ast.AugAssign)
                        for target in (node.targets if isinstance(node, ast.Assign)
                                       else [node.target])):
                    names.add(method.name)
    return frozenset(names)


def returning_jobs(trees: list[ast.Module]) -> dict[str, str]:
    """Function name -> ONE or MANY, for every function annotated to return jobs/attempts."""
    found: dict[str, str] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                kind = _annotation_kind(node.returns)
                if kind is not None:
                    found[node.name] = kind
    return found


class _Scope:
    def __init__(self, returns: dict[str, str], outer: dict[str, set[str]] | None = None
                 ) -> None:
        self.returns = returns
        self.names: dict[str, set[str]] = {k: set(v) for k, v in (outer or {}).items()}

    def kind(self, node: ast.expr) -> set[str]:
        if isinstance(node, ast.Name):
            return self.names.get(node.id, set())
        if isinstance(node, ast.Attribute):
            inner = self.kind(node.value)
            if node.attr == "jobs":
                return {MANY}
            if ONE in inner and node.attr in ("current", "placed"):
                return {ONE}
            if ONE in inner and node.attr in FIELDS:
                return {FIELD, MANY} if node.attr == "history" else {FIELD}
            return set()
        if isinstance(node, ast.Subscript):
            return {ONE} if MANY in self.kind(node.value) else set()
        if isinstance(node, ast.Call):
            return self._call_kind(node)
        if isinstance(node, ast.IfExp):
            return self.kind(node.body) | self.kind(node.orelse)
        if isinstance(node, ast.BoolOp):
            return set().union(*(self.kind(value) for value in node.values))
        if isinstance(node, ast.NamedExpr | ast.Await):
            return self.kind(node.value)
        if isinstance(node, ast.Starred):
            return self.kind(node.value)
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            self.bind_comprehensions(node.generators)
            return {MANY} if ONE in self.kind(node.elt) else set()
        if isinstance(node, ast.DictComp):
            self.bind_comprehensions(node.generators)
            return {MANY} if ONE in self.kind(node.value) else set()
        if isinstance(node, ast.Dict):
            return {MANY} if any(ONE in self.kind(v) for v in node.values) else set()
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return {MANY} if any(ONE in self.kind(e) for e in node.elts) else set()
        return set()

    def _call_kind(self, node: ast.Call) -> set[str]:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else ""
        first = self.kind(node.args[0]) if node.args else set()
        if isinstance(func, ast.Name) and func.id in TYPES:
            return {ONE}
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id in TYPES:
            return {ONE}  # JobState.from_json(...)
        if isinstance(func, ast.Name) and name in ("replace", "copy", "deepcopy", "next"):
            return {ONE} if ONE in first or (name == "next" and MANY in first) else set()
        if isinstance(func, ast.Name) and name in WRAPPERS:
            return {MANY} if MANY in first else set()
        if isinstance(func, ast.Attribute):
            owner = self.kind(func.value)
            if MANY in owner and name in ("get", "pop", "setdefault"):
                return {ONE}
            if MANY in owner and name in ("values", "items", "copy"):
                return {MANY}
        kind = self.returns.get(name)
        return {kind} if kind else set()

    def bind(self, target: ast.expr, kind: set[str]) -> bool:
        """Give `target`'s names `kind`; True when something new was learnt."""
        if isinstance(target, ast.Name):
            known = self.names.setdefault(target.id, set())
            new = kind - known
            known |= kind
            return bool(new)
        if isinstance(target, ast.Tuple | ast.List):
            return any([self.bind(elt, kind) for elt in target.elts])
        if isinstance(target, ast.Starred):
            return self.bind(target.value, kind)
        return False

    def bind_comprehensions(self, generators: list[ast.comprehension]) -> bool:
        return any([self.bind(gen.target, {ONE}) for gen in generators
                    if MANY in self.kind(gen.iter)])

    def learn(self, body: list[ast.AST]) -> None:
        """Every binding in `body` (not in nested functions), until nothing new is learnt:
        order does not matter (a name may be a job on one path only)."""
        nodes = [node for node in _own_nodes(body)]
        changed = True
        while changed:
            changed = False
            for node in nodes:
                if isinstance(node, ast.Assign):
                    kind = self.kind(node.value)
                    if isinstance(node.value, ast.Tuple) and len(node.targets) == 1 \
                            and isinstance(node.targets[0], ast.Tuple) \
                            and len(node.targets[0].elts) == len(node.value.elts):
                        changed |= any([self.bind(t, self.kind(v)) for t, v in zip(
                            node.targets[0].elts, node.value.elts, strict=True)])
                        continue
                    if MANY in kind and any(isinstance(t, ast.Tuple) for t in node.targets):
                        kind = {ONE}
                    changed |= any([self.bind(t, kind) for t in node.targets])
                elif isinstance(node, ast.AnnAssign):
                    kind = {k for k in [_annotation_kind(node.annotation)] if k}
                    if node.value is not None:
                        kind |= self.kind(node.value)
                    changed |= self.bind(node.target, kind)
                elif isinstance(node, ast.NamedExpr):
                    changed |= self.bind(node.target, self.kind(node.value))
                elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                    if MANY in self.kind(node.iter):
                        changed |= self.bind(node.target, {ONE})
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    changed |= self.bind(node.optional_vars, self.kind(node.context_expr))


def _own_nodes(body: list[ast.AST]) -> Iterator[ast.AST]:
    """The nodes of a function's body, less those of functions and classes nested in it."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, ast.AugAssign) or (isinstance(node, ast.AnnAssign)
                                             and node.value is not None):
        found = [node.target]
    elif isinstance(node, ast.Delete):
        found = list(node.targets)
    else:
        return []
    flat: list[ast.expr] = []
    while found:
        target = found.pop()
        if isinstance(target, ast.Tuple | ast.List):
            found.extend(target.elts)
        elif isinstance(target, ast.Starred):
            found.append(target.value)
        else:
            flat.append(target)
    return flat


def _writes_in(scope: _Scope, body: list[ast.AST], methods: frozenset[str]
               ) -> Iterator[ast.AST]:
    for node in _own_nodes(body):
        for target in _targets(node):
            if isinstance(target, ast.Attribute):
                owner = scope.kind(target.value)
                if (ONE in owner and target.attr in FIELDS) or FIELD in owner:
                    yield node
            elif isinstance(target, ast.Subscript):
                base: ast.expr = target
                while isinstance(base, ast.Subscript):
                    base = base.value
                if FIELD in scope.kind(base):
                    yield node
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else ""
        first = scope.kind(node.args[0]) if node.args else set()
        owner = scope.kind(func.value) if isinstance(func, ast.Attribute) else set()
        if (name in ("setattr", "delattr", "__setattr__") and ONE in first) \
                or (name in MUTATORS and FIELD in owner) or (name in methods and ONE in owner):
            yield node


def _functions(tree: ast.AST, skip_classes: frozenset[str]) -> Iterator[
        tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[ast.AST]]]:
    """Each function with its enclosing functions (outermost first), less the methods of the
    classes in `skip_classes`."""
    def visit(node: ast.AST, outer: list[ast.AST]) -> Iterator[
            tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[ast.AST]]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef) and child.name in skip_classes:
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield child, outer
                yield from visit(child, [*outer, child])
            else:
                yield from visit(child, outer)
    yield from visit(tree, [])


def _scope_for(function: ast.FunctionDef | ast.AsyncFunctionDef, outer: list[ast.AST],
               module: _Scope) -> _Scope:
    scope = _Scope(module.returns, module.names)
    for enclosing in [*outer, function]:
        assert isinstance(enclosing, ast.FunctionDef | ast.AsyncFunctionDef)
        args = enclosing.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                    *[a for a in (args.vararg, args.kwarg) if a is not None]]:
            kind = _annotation_kind(arg.annotation)
            if kind is not None:
                scope.names.setdefault(arg.arg, set()).add(kind)
        scope.learn(list(enclosing.body))
    return scope


def writes(sources: dict[str, str], *, model: str) -> list[Write]:
    """Every write of a job's or an attempt's field in `sources` (path -> text); `model`: the
    text of api/model.py (its dataclasses' own methods are the writers' tools, not writers)."""
    model_tree = ast.parse(model)
    methods = writing_methods(model_tree)
    trees = {path: ast.parse(text) for path, text in sources.items()}
    returns = returning_jobs([*trees.values(), model_tree])
    found: list[Write] = []
    for path, tree in trees.items():
        module_scope = _Scope(returns)
        module_scope.learn(list(tree.body))
        top = [node for node in tree.body
               if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
        hits = list(_writes_in(module_scope, top, methods))
        for function, outer in _functions(tree, TYPES):
            scope = _scope_for(function, outer, module_scope)
            hits += list(_writes_in(scope, list(function.body), methods))
        found += [Write(f"{path}:{getattr(node, 'lineno', 0)}", ast.unparse(node)[:80])
                  for node in hits]
    return sorted(set(found), key=lambda w: w.where)


def writes_outside(root: Path, allowed: str) -> list[Write]:
    """Every write in eq_tui/ but in `allowed` (a path under root)."""
    sources = {path.relative_to(root).as_posix(): path.read_text()
               for path in sorted((root / "eq_tui").rglob("*.py"))
               if path.relative_to(root).as_posix() != allowed}
    return writes(sources, model=(root / "eq_tui" / "api" / "model.py").read_text())
