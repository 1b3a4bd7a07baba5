"""The manifest's JSON Schema: the committed copy is what `eq-tui schema` prints, the samples
point at it and pass it, and on fuzzed manifests whatever it rejects the loader rejects too."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eq_tui.cli.main import main
from eq_tui.errors import ManifestError
from eq_tui.manifest import json_schema, schema
from eq_tui.manifest.json_schema import SCHEMA, schema_text
from eq_tui.manifest.loader import load_manifest_text

ROOT = Path(__file__).resolve().parent.parent.parent
COMMITTED = ROOT / "docs" / "manifest.schema.json"
SAMPLES = sorted((ROOT / "sample_manifests").glob("*.yaml"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def test_the_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_eq_tui_schema_prints_the_committed_copy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    assert printed == schema_text()
    assert COMMITTED.read_text(encoding="utf-8") == printed, (
        "docs/manifest.schema.json is stale: run `eq-tui schema > docs/manifest.schema.json`")


def test_the_loader_checks_the_keys_the_schema_lists() -> None:
    defs = SCHEMA["$defs"]
    assert set(SCHEMA["properties"]) == schema.TOP_KEYS
    assert set(defs["host"]["properties"]) == schema.HOST_KEYS
    assert set(defs["phase"]["properties"]) == schema.PHASE_KEYS
    assert set(defs["job"]["properties"]) == set(defs["template"]["properties"]) \
        == schema.JOB_KEYS


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_every_sample_points_at_the_schema_and_passes_it(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    target = (path.parent / first.split("$schema=", 1)[1].strip()).resolve()
    assert target == COMMITTED
    VALIDATOR.validate(yaml.safe_load(text))
    load_manifest_text(text, str(path))


def _errors(document: Any) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(document)]


@pytest.mark.parametrize(("document", "expected"), [
    ({"jobs": [{"id": "a", "cmd": "x"}], "lanucher": "tmux"}, "lanucher"),
    ({"ssh": "a", "hosts": [{"name": "b"}], "jobs": [{"id": "a", "cmd": "x"}]}, "should not"),
    ({"env": {"K": {"from_env": "K", "value": "v"}}, "jobs": [{"id": "a", "cmd": "x"}]},
     "not valid under any"),
    ({"grid": {"GPU": [1]}, "template": {"cmd": "x"}}, "GPU"),
    ({"hosts": [{"name": "b", "gpus": [0, 0]}], "jobs": [{"id": "a", "cmd": "x"}]},
     "[0, 0]"),
])
def test_the_schema_rejects_what_an_editor_should_flag(document: dict[str, Any],
                                                       expected: str) -> None:
    errors = _errors(document)
    assert errors and any(expected in e for e in errors), errors
    with pytest.raises(ManifestError):
        load_manifest_text(json.dumps(document), "m.json")


# ---- fuzzing: the schema is never stricter than the loader ----------------------------------

_KEYS = sorted(schema.TOP_KEYS | schema.HOST_KEYS | schema.PHASE_KEYS | schema.SLURM_KEYS
               | schema.SIMULATE_KEYS | schema.ENV_KEYS | schema.OOM_KEYS
               | {"N", "seed", "lr", "K", "all", "screen", "tmux", "block", "run", "${N}"})
# the edge values a schema and a loader most often disagree on, then anything
_EDGES = st.sampled_from([None, True, False, 0, 1, -1, 2, 1.5, 1.0, "", "all", "x", "1", "a b",
                          [], {}, [0], ["x"], {"x": 1}]).map(copy.deepcopy)  # never shared
_SCALARS = st.one_of(
    _EDGES, st.booleans(), st.integers(min_value=-3, max_value=70000),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(_KEYS), st.text(max_size=8))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(_KEYS), inner, max_size=3)),
    max_leaves=8)
# Small valid manifests with every kind of mapping the schema knows, and where those are
_FLAT = {"hosts": [{"name": "s", "simulate": {"gpus": 2}}, {"name": "c", "slurm": {"qos": "q"}},
                   {"name": "b", "ssh": "box"}],
         "env": {"K": {"from_env": "K"}, "F": {"from_file": "~/.k"}, "V": {"value": 1}},
         "oom_retry": {"delay": 1}, "jobs": [{"id": "a", "cmd": "python t.py",
                                              "preconditions": [{"path": "p"}]}],
         "grid": {"N": [1, 2]}, "template": {"cmd": "x ${N}", "args": {"seed": 1}}}
_PHASED = {"ssh": "box", "default_cmd": "python t.py", "phases": [
    {"name": "a", "jobs": [{"id": "a1", "args": {"x": 1}}]},
    {"name": "b", "depends_on": "a", "grid": {"N": [1]}, "template": {"cmd": "x ${N}"}}]}
_SLOTS = [(_FLAT, (), "top"), (_FLAT, ("hosts", 0), "host"), (_FLAT, ("hosts", 2), "host"),
          (_FLAT, ("hosts", 0, "simulate"), "simulate"), (_FLAT, ("hosts", 1, "slurm"), "slurm"),
          (_FLAT, ("env", "K"), "env_var"), (_FLAT, ("env", "V"), "env_var"),
          (_FLAT, ("oom_retry",), "oom_retry"), (_FLAT, ("jobs", 0), "job"),
          (_FLAT, ("jobs", 0, "preconditions", 0), "precondition"),
          (_FLAT, ("template",), "template"), (_PHASED, (), "top"),
          (_PHASED, ("phases", 0), "phase"), (_PHASED, ("phases", 1), "phase")]
_BASES = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in SAMPLES] + [_FLAT, _PHASED]


def _place_keys(where: str) -> list[str]:
    return sorted(schema.ENV_KEYS if where == "env_var" else json_schema.keys(where))


@st.composite
def _one_key_off(draw: st.DrawFn) -> Any:
    """A valid manifest with one known key of one mapping set to an edge or random value."""
    base, path, where = draw(st.sampled_from(_SLOTS))
    document = copy.deepcopy(base)
    parent = document
    for part in path:
        parent = parent[part]
    parent[draw(st.sampled_from(_place_keys(where)))] = draw(st.one_of(_EDGES, _VALUES))
    return document


def _paths(node: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [here]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*here, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*here, i))
    return found


@st.composite
def _mutated(draw: st.DrawFn) -> Any:
    document = copy.deepcopy(draw(st.sampled_from(_BASES)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(_paths(document)))
        if not path:
            continue
        parent = document
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["edge", "replace", "delete", "add"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(_KEYS))] = draw(_VALUES)
        else:
            parent[path[-1]] = draw(_EDGES if action == "edge" else _VALUES)
    return document


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_one_key_off(), _mutated()))
def test_what_the_schema_rejects_the_loader_rejects(document: Any) -> None:
    # the positive half: the documents mutated from are manifests to both (a schema or loader
    # that refused everything would pass the rest alone)
    base = _BASES[len(str(document)) % len(_BASES)]
    loaded = load_manifest_text(json.dumps(base), "base.json")
    assert _errors(base) == [] and (loaded.jobs or any(p.search for p in loaded.phases))
    errors = _errors(document)
    if not errors:
        return
    try:
        load_manifest_text(json.dumps(document), "fuzz.json")
    except ManifestError:
        return
    pytest.fail(f"the schema rejects ({errors[0]}) what the loader accepts: {document!r}")
