"""Manifest loading: seed forms, expansion order, quoting, JSON, located errors, fuzzing."""

from __future__ import annotations

import json
import os
import shlex
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eq_tui.errors import ManifestError
from eq_tui.manifest import load_manifest, load_manifest_text
from eq_tui.manifest.expand import MAX_GRID_POINTS
from eq_tui.manifest.jobs import parse_grid
from eq_tui.manifest.model import DEFAULT_PHASE, Manifest, Precondition
from eq_tui.manifest.schema import Context
from eq_tui.manifest.yaml_lines import Located
from tests.support.manifest_props import VALID_JSON, VALID_YAML, assert_valid_loads, load_checked

SAMPLES = Path(__file__).resolve().parent.parent.parent.parent / "sample_manifests"
EXAMPLES = int(os.environ.get("EQ_HYPOTHESIS_EXAMPLES", "200"))


def load(text: str, source: str = "m.yaml") -> Manifest:
    return load_manifest_text(textwrap.dedent(text), source)


def test_seed_jobs_with_args_after_default_cmd() -> None:
    m = load("""
        project: p
        default_cmd: python run.py --lam 0.5
        jobs:
          - {id: s200_N64, args: {seed: 200, n_hidden: 64}}
          - {id: direct, cmd: python other.py}
        """)
    assert [(j.id, j.cmd, j.phase) for j in m.jobs] == [
        ("s200_N64", "python run.py --lam 0.5 --seed 200 --n_hidden 64", DEFAULT_PHASE),
        ("direct", "python other.py", DEFAULT_PHASE)]
    assert [h.name for h in m.hosts] == ["local"]


def test_grid_last_key_varies_fastest() -> None:
    m = load("""
        default_cmd: python run.py
        grid: {N: [64, 128], seed: [42, 200]}
        template:
          id: "s${seed}_N${N}"
          args: {seed: "${seed}", n_hidden: "${N}"}
          output_check: "out/s${seed}_N${N}.json"
        """)
    assert [j.id for j in m.jobs] == ["s42_N64", "s200_N64", "s42_N128", "s200_N128"]
    assert m.jobs[1].cmd == "python run.py --seed 200 --n_hidden 64"
    assert m.jobs[1].output_check == "out/s200_N64.json"
    assert m.project == "m"  # the file's stem


def test_phases_depends_on_string_or_list() -> None:
    m = load("""
        phases:
          - {name: a, jobs: [{id: a1, cmd: x}]}
          - {name: b, depends_on: a, jobs: [{id: b1, cmd: x}]}
          - {name: c, depends_on: [a, b], on_dependency_failure: run,
             grid: {N: [1]}, template: {id: "c${N}", cmd: "y ${N}",
             preconditions: [{type: checkpoint_exists, path: "ck/${N}.pt"}]}}
        """)
    assert [(p.name, p.depends_on) for p in m.phases] == [("a", ()), ("b", ("a",)),
                                                          ("c", ("a", "b"))]
    assert m.phase("c").on_dependency_failure == "run"
    assert [(j.id, j.phase) for j in m.jobs] == [("a1", "a"), ("b1", "b"), ("c1", "c")]
    assert m.jobs[2].preconditions[0].path == "ck/1.pt"


def test_args_rendering_bools_lists_null_and_launch_vars() -> None:
    m = load("""
        default_cmd: run
        args: {fast: true, slow: false, drop: 1}
        jobs:
          - id: j
            args: {ids: [1, two], drop: null, dev: "cuda:${GPU}", lr: 0.10}
            output_check: "${RUN_DIR}/${JOB_ID}.${ATTEMPT}"
        """)
    assert m.jobs[0].cmd == "run --fast --ids 1 two --dev 'cuda:${GPU}' --lr 0.10"
    assert m.jobs[0].output_check == "${RUN_DIR}/${JOB_ID}.${ATTEMPT}"


@pytest.mark.parametrize("value", ["; touch pwned", "$(id)", "`id`", "it's \"quoted\"",
                                   "line1\nline2", "a b && c | d > e"])
def test_arg_values_are_shell_quoted(value: str) -> None:
    m = load_manifest_text(json.dumps({"default_cmd": "run", "jobs": [
        {"id": "j", "args": {"name": value}}], "grid": {"v": [value]},
        "template": {"id": "g", "cmd": "run --v ${v}"}}), "m.json")
    assert shlex.split(m.jobs[0].cmd) == ["run", "--name", value]
    assert shlex.split(m.jobs[1].cmd) == ["run", "--v", value]


def test_dollar_dollar_is_a_literal_dollar() -> None:
    m = load("jobs: [{id: j, cmd: 'echo $${HOME} $$x'}]\n")
    assert m.jobs[0].cmd == "echo ${HOME} $x"


def test_job_args_are_variables_for_id_and_cmd() -> None:
    m = load("jobs: [{id: 's${seed}', cmd: 'run ${seed}', args: {seed: 7}}]\n")
    assert (m.jobs[0].id, m.jobs[0].cmd) == ("s7", "run 7 --seed 7")


def test_json_input_numbers_and_tabs(tmp_path: Path) -> None:
    path = tmp_path / "sweep.json"
    path.write_text('{\n\t"oom_retry": {"delay": 1e2},\n\t"jobs": [{"id": "a", "cmd": "x"}]\n}')
    m = load_manifest(path)
    assert m.project == "sweep" and m.oom_retry.delay == 100.0
    path.write_text('{\n\t"jobs": [{"id": "a", "cmd": "x"}],\n\t"waves": "nope"\n}')
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    assert err.value.line == 3 and err.value.key_path == "waves"


def test_hosts_and_ssh_seed_form() -> None:
    m = load("""
        ssh: me@10.0.0.7:2222
        gpus: [0, 1]
        max_parallel: 2
        jobs: [{id: a, cmd: x, gpus_per_job: 2}]
        """)
    host = m.hosts[0]
    assert (host.name, host.ssh, host.gpus, host.max_parallel) == ("10.0.0.7", "me@10.0.0.7:2222",
                                                                   (0, 1), 2)
    m = load("""
        hosts:
          - {name: box1, ssh: box1, gpus: [0, 1, 2, 3], max_parallel: 4}
          - {name: box2, ssh: "me@10.0.0.7:2222", gpus: all}
          - {name: here}
          - {name: sim, simulate: {gpus: 4, memory_mib: 24576}}
          - {name: cluster, slurm: {ssh: login1, partition: gpu, time: 04:00:00,
                                    sbatch_args: [--time=04:00:00]}}
        env: {A: 1, B: {value: s, secret: true}, C: true}
        jobs: [{id: a, cmd: x}]
        """)
    assert [h.kind for h in m.hosts] == ["ssh", "ssh", "local", "sim", "slurm"]
    assert m.hosts[4].slurm is not None and m.hosts[4].slurm.time == "04:00:00"
    assert {k: (v.value, v.secret) for k, v in m.env.items()} == {
        "A": ("1", False), "B": ("s", True), "C": ("true", False)}


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_sample_manifests_load(path: Path) -> None:
    m = load_manifest(path)
    # a search's jobs are made as it runs (its trials)
    assert m.jobs or any(phase.search for phase in m.phases)
    assert len({j.id for j in m.jobs}) == len(m.jobs)


JOB = "jobs: [{id: a, cmd: x}]\n"

# (manifest text, expected key path in the message, expected line, a word of the message)
BAD = [
    ("", "", None, "empty"),
    ("- a\n- b\n", "", 1, "mapping"),
    ("jobs: [\n", "", 2, "invalid YAML"),
    ("projet: p\n" + JOB, "projet", 1, "did you mean 'project'"),
    (JOB + "launcher: scren\n", "launcher", 2, "did you mean 'screen'"),
    (JOB + "waves: 3\n", "waves", 2, "expected a string"),
    (JOB + "poll: 0\n", "poll", 2, "greater than 0"),
    (JOB + "gpu_free_threshold_mib: many\n", "gpu_free_threshold_mib", 2, "integer"),
    (JOB + "oom_retry: {delay: -1}\n", "oom_retry.delay", 2, "at least 0"),
    (JOB + "oom_retry:\n  max_attempts: 0\n", "oom_retry.max_attempts", 3, "at least 1"),
    (JOB + "oom_retry: {delays: 1}\n", "oom_retry.delays", 2, "did you mean 'delay'"),
    ("project: 'a b'\n" + JOB, "project", 1, "letters, digits"),
    ("jobs:\n  - {id: a, cmd: x}\n  - {id: a, cmd: y}\n", "jobs[1]", 3, "duplicate job id 'a'"),
    ("jobs:\n  - {id: 'a/b', cmd: x}\n", "jobs[0].id", 2, "letters, digits"),
    ("jobs:\n  - {id: a}\n", "jobs[0]", 2, "no 'cmd'"),
    ("jobs:\n  - {cmd: x}\n", "jobs[0]", 2, "needs an 'id'"),
    ("jobs:\n  - {id: a, cmd: x, arg: {}}\n", "jobs[0].arg", 2, "did you mean 'args'"),
    ("jobs:\n  - {id: a, cmd: 'run ${nope}'}\n", "jobs[0].cmd", 2, "undefined variable ${nope}"),
    ("grid: {N: [1, 2]}\ntemplate:\n  id: t\n  cmd: x\n", "grid", 1, "duplicate job id 't'"),
    ("grid: {N: []}\ntemplate: {id: t, cmd: x}\n", "grid.N", 1, "no values"),
    ("template: {id: t, cmd: x}\n", "template", 1, "needs a 'grid'"),
    ("grid: {N: [1]}\ntemplate:\n  id: t${N}\n  cmd: x\n  output_check: o/${M}\n",
     "template.output_check", 5, "undefined variable ${M}"),
    ("default_cmd: x\n", "", 1, "no jobs"),
    ("phases:\n  - {name: a, jobs: [{id: a, cmd: x}]}\n  - name: b\n    depends_on: c\n"
     "    jobs: [{id: b, cmd: x}]\n", "phases[1].depends_on", 4, "unknown phase 'c'"),
    ("phases:\n  - {name: a, depends_on: [b], jobs: [{id: a, cmd: x}]}\n"
     "  - {name: b, depends_on: a, jobs: [{id: b, cmd: x}]}\n", "depends_on", 3,
     "cycle: a → b → a"),
    ("phases:\n  - {name: a}\n  - {name: b, depends_on: a, jobs: [{id: b, cmd: x}]}\n",
     "phases[1].depends_on", 3, "has no jobs"),
    ("phases:\n  - {name: a, jobs: [{id: a, cmd: x}]}\n  - {name: a, jobs: [{id: b, cmd: x}]}\n",
     "phases[1].name", 3, "defined twice"),
    (JOB + "phases:\n  - {name: a, jobs: [{id: b, cmd: x}]}\n", "jobs", 1, "cannot be combined"),
    ("phases:\n  - {name: a, depend_on: x}\n", "phases[0].depend_on", 2,
     "did you mean 'depends_on'"),
    (JOB + "ssh: box\nhosts: [{name: a}]\n", "hosts", 3, "not both"),
    (JOB + "hosts:\n  - {name: a}\n  - {name: b, gpus: [0, x]}\n", "hosts[1].gpus[1]", 4,
     "integer"),
    (JOB + "hosts:\n  - {name: a}\n  - {name: a}\n", "hosts[1].name", 4, "used twice"),
    (JOB + "hosts:\n  - {nam: a}\n", "hosts[0].nam", 3, "did you mean 'name'"),
    (JOB + "hosts:\n  - name: s\n    simulate: {gpus: 2, memry_mib: 1}\n",
     "hosts[0].simulate.memry_mib", 4, "did you mean 'memory_mib'"),
    (JOB + "hosts:\n  - {name: s, ssh: b, slurm: {partition: gpu}}\n", "hosts[0].slurm", 3,
     "not ssh and slurm"),
    ("gpus: [0, 1]\njobs:\n  - {id: a, cmd: x, gpus_per_job: 3}\n", "jobs[0]", 3,
     "needs 3 GPUs"),
    (JOB + "env: {'1BAD': x}\n", "env.1BAD", 2, "environment variable name"),
    (JOB + "env:\n  A: {secret: true}\n", "env.A", 3,
     "give exactly one of 'value', 'from_env' or 'from_file'"),
    (JOB + "env:\n  A: {value: x, from_env: A}\n", "env.A", 3, "not value and from_env"),
    (JOB + "env:\n  A: {from_env: A, secret: false}\n", "env.A.secret", 3, "always secret"),
    (JOB + "env:\n  A: {from_env: 'not a name'}\n", "env.A.from_env", 3,
     "not a valid environment variable name"),
    (JOB + "env:\n  A: {from_file: ''}\n", "env.A.from_file", 3, "needs a path"),
    (JOB + "env:\n  A: {from_envv: A}\n", "env.A.from_envv", 3, "did you mean 'from_env'"),
    (JOB + "preconditions: [{type: file_exists, path: x}]\n", "preconditions[0].type", 2,
     "checkpoint_exists"),
    ("jobs:\n  - {id: a, cmd: x}\njobs: []\n", "jobs", 3, "duplicate key"),
    ("jobs:\n  - id: a\n    cmd: x\n    args: {'--seed': 1}\n", "jobs[0].args.--seed", 4,
     "without the leading --"),
    ("jobs: [{id: a, cmd: x}]\nargs: {x: {nested: 1}}\n", "args.x", 2, "argument value"),
    (JOB + "stale_grace_s: .nan\n", "stale_grace_s", 2, "finite"),
    ("jobs: [{id: a, cmd: x}]\ngrid: {GPU: [1]}\ntemplate: {cmd: y}\n", "grid.GPU", 2,
     "launch time"),
    ("cwd: !!python/name:os.system x\n" + JOB, "", 1, "invalid YAML"),
]


@pytest.mark.parametrize(("text", "key_path", "line", "words"), BAD,
                         ids=[f"{i}-{case[3][:20]}" for i, case in enumerate(BAD)])
def test_bad_manifests_name_key_path_and_line(text: str, key_path: str, line: int | None,
                                              words: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(text, "bad.yaml")
    err = caught.value
    message = str(err)
    assert words in message
    assert err.key_path == key_path or key_path in err.key_path
    assert err.line == line
    if line is not None:
        assert message.startswith(f"bad.yaml:{line}:")
    assert err.exit_code == 2
    assert "Traceback" not in message and "internal error" not in message


def test_missing_file_is_a_manifest_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as err:
        load_manifest(tmp_path / "nope.yaml")
    assert err.value.exit_code == 2
    assert str(err.value) == f"{tmp_path / 'nope.yaml'}: no such file"


def _outcome(text: str, source: str = "fuzz.yaml") -> None:
    load_checked(text, source)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(alphabet=list("abN ${}[]:,-'\"\n\t#&*!|>0129.@%"), max_size=120),
                 st.text(max_size=60)))
def test_fuzz_arbitrary_text(text: str) -> None:
    _outcome(text)
    _outcome(text, "fuzz.json")
    assert_valid_loads(VALID_YAML, "fuzz.yaml")
    assert_valid_loads(VALID_JSON, "fuzz.json")


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=True),
                     st.sampled_from(["a", "x", "${N}", "${GPU}", "${nope}", "a b", "$$", "all",
                                      "screen", "a1", "", "main", "-1", "; rm -rf /"]))
_keys = st.sampled_from(["id", "cmd", "args", "name", "depends_on", "grid", "template", "jobs",
                         "gpus", "ssh", "hosts", "phases", "N", "seed", "poll", "env",
                         "simulate", "slurm", "output_check", "preconditions", "type", "path",
                         "gpus_per_job", "oom_retry", "delay", "default_cmd", "launcher"])
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=4)), max_leaves=12)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_keys, _values, max_size=6))
def test_fuzz_near_miss_manifests(data: dict[str, object]) -> None:
    base: dict[str, object] = {"default_cmd": "run", "jobs": [{"id": "a"}]}
    _outcome(json.dumps({**base, **data}), "near.json")
    _outcome(yaml.safe_dump({**base, **data}), "near.yaml")
    assert_valid_loads(json.dumps(base), "near.json")  # the base itself is a manifest
    assert_valid_loads(yaml.safe_dump(base), "near.yaml")


ENV_JOB = "jobs: [{id: a, cmd: x}]\n"


@pytest.mark.parametrize(("text", "key_path", "words"), [
    (ENV_JOB + "env: [A]\n", "env", "expected a mapping"),
    (ENV_JOB + "env:\n  A: {value: x, secrt: true}\n", "env.A.secrt", "unknown key"),
    (ENV_JOB + "env:\n  A: {secret: true}\n", "env.A",
     "give exactly one of 'value', 'from_env' or 'from_file'"),
    (ENV_JOB + "env:\n  A: {value: [1]}\n", "env.A.value", "expected"),
    (ENV_JOB + "env:\n  A: {value: x, secret: maybe}\n", "env.A.secret", "expected"),
    (ENV_JOB + "env:\n  A: [1]\n", "env.A", "expected"),
    (ENV_JOB + "oom_retry: 3\n", "oom_retry", "expected a mapping"),
])
def test_env_and_oom_retry_errors_name_their_exact_key(text: str, key_path: str,
                                                       words: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(text, "env.yaml")
    assert caught.value.key_path == key_path
    assert caught.value.message.startswith(words), caught.value.message


def test_env_values_and_their_secrecy() -> None:
    loaded = load_manifest_text(ENV_JOB + "env:\n  A: 1\n  B: true\n  C: {value: s}\n"
                                "  D: {value: t, secret: true}\n  E: yes\n  F: True\n",
                                "env.yaml")
    # a YAML boolean reaches the job as true/false, however it was spelled
    assert {k: (v.value, v.secret) for k, v in loaded.env.items()} == {
        "A": ("1", False), "B": ("true", False), "C": ("s", False), "D": ("t", True),
        "E": ("true", False), "F": ("true", False)}


# ---- jobs.py: every job-source error, with its exact key path, line and message -------------

JOB_A = "jobs:\n  - id: a\n    cmd: x\n"
UNDEFINED = ("undefined variable ${nope}%s; defined: %s; launch-time: ATTEMPT, GPU, JOB_ID, "
             "RUN_DIR; write $${nope} for a literal shell variable")
LETTERS = "may only use letters, digits, '_', '.', '-'"


@pytest.mark.parametrize(("text", "key_path", "line", "message"), [
    (JOB_A + "    args: [1]\n", "jobs[0].args", 4, "expected a mapping, got a list"),
    (JOB_A + "    args: {'a b': 1}\n", "jobs[0].args.a b", 4, f"argument name 'a b' {LETTERS}"),
    (JOB_A + "    args: {'--seed': 1}\n", "jobs[0].args.--seed", 4,
     f"argument name '--seed' {LETTERS} (write it without the leading --)"),
    (JOB_A + "    args: {x: {nested: 1}}\n", "jobs[0].args.x", 4,
     "an argument value must be a string, number, boolean, null or a list of those"),
    (JOB_A + "    args: {x: [1, {a: 1}]}\n", "jobs[0].args.x[1]", 4,
     "a list argument holds strings, numbers or booleans"),
    (JOB_A + "    args: {x: '${nope}'}\n", "jobs[0].args.x", 4, UNDEFINED % ("", "none here")),
    (JOB_A + "    args: {x: [ok, '${nope}']}\n", "jobs[0].args.x[1]", 4,
     UNDEFINED % ("", "none here")),
    ("grid: {N: [1]}\ntemplate:\n  cmd: x\n  args: {x: '${nope}'}\n", "template.args.x", 4,
     UNDEFINED % (" (grid point N=1)", "N")),
    ("grid: {N: [1]}\ntemplate:\n  cmd: x\n  args: {x: [a, '${nope}']}\n",
     "template.args.x[1]", 4, UNDEFINED % (" (grid point N=1)", "N")),
    (JOB_A + "    preconditions: {path: x}\n", "jobs[0].preconditions", 4,
     "expected a list, got a mapping"),
    (JOB_A + "    preconditions: [x]\n", "jobs[0].preconditions[0]", 4,
     "expected a mapping, got a string ('x')"),
    (JOB_A + "    preconditions: [{path: x, typ: y}]\n", "jobs[0].preconditions[0].typ", 4,
     "unknown key 'typ'; did you mean 'type'?"),
    (JOB_A + "    preconditions: [{type: checkpoint_exists}]\n", "jobs[0].preconditions[0]", 4,
     "a precondition needs a 'path'"),
    (JOB_A + "    preconditions: [{path: [1]}]\n", "jobs[0].preconditions[0].path", 4,
     "expected a string, got a list"),
    ("preconditions: [{path: '${nope}'}]\n" + JOB_A, "preconditions[0].path", 1,
     UNDEFINED % ("", "none here")),
    ("grid: [1]\ntemplate: {cmd: x}\n", "grid", 1, "expected a mapping, got a list"),
    ("grid: {'a b': [1]}\ntemplate: {cmd: x}\n", "grid.a b", 1,
     "grid variable 'a b' must be a name like N or lr"),
    ("grid: {N: 1}\ntemplate: {cmd: x}\n", "grid.N", 1, "expected a list, got an integer (1)"),
    ("grid: {N: [{a: 1}]}\ntemplate: {cmd: x}\n", "grid.N[0]", 1,
     "grid values must be strings, numbers or booleans"),
    ("grid: {}\ntemplate: {cmd: x}\n", "grid", 1, "the grid is empty"),
    ("grid: {N: [1]}\ntemplate: x\n", "template", 2, "expected a mapping, got a string ('x')"),
    ("grid: {N: [1, 2]}\ntemplate:\n  id: t\n  cmd: x\n", "grid", 1,
     "duplicate job id 't': made by grid point N=2 of grid (line 1) and by grid point N=1 of "
     "grid (line 1)"),
])
def test_job_source_errors_name_their_exact_key_line_and_message(text: str, key_path: str,
                                                                 line: int, message: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(text, "m.yaml")
    assert (caught.value.key_path, caught.value.line, caught.value.message) == (
        key_path, line, message)


def test_a_grid_with_a_default_cmd_and_no_template_names_its_jobs_from_the_points() -> None:
    m = load("grid: {N: [1, 2]}\ndefault_cmd: train --n ${N}\n")
    assert [(j.id, j.cmd) for j in m.jobs] == [("N1", "train --n 1"), ("N2", "train --n 2")]


def test_numbers_bools_and_variables_in_grid_values_and_list_args() -> None:
    m = load("""\
        grid: {lr: [0.10], N: [1]}
        template:
          cmd: x ${lr}
          args: {l: [0.10, 5, true, '${N}', '$${HOME}']}
        """)
    # numbers keep the text written, variables are filled in, a bool is its word
    assert [(j.id, j.cmd) for j in m.jobs] == [
        ("lr0.10_N1", "x 0.10 --l 0.10 5 true 1 '${HOME}'")]


def test_a_precondition_without_a_type_checks_for_a_checkpoint() -> None:
    m = load(JOB_A + "    preconditions: [{path: ckpt.pt}]\n")
    assert m.jobs[0].preconditions == (Precondition(type="checkpoint_exists", path="ckpt.pt"),)


def test_a_grid_may_have_max_grid_points_and_no_more() -> None:
    ctx = Context("m.yaml", Located({}, {("grid",): 1}))
    values = list(range(MAX_GRID_POINTS))
    assert len(parse_grid(ctx, {"a": values}, ("grid",))["a"]) == MAX_GRID_POINTS
    with pytest.raises(ManifestError) as caught:
        parse_grid(ctx, {"a": [*values, -1]}, ("grid",))
    assert (caught.value.key_path, caught.value.line, caught.value.message) == (
        "grid", 1, f"the grid has {MAX_GRID_POINTS + 1} points; at most {MAX_GRID_POINTS}")


def test_a_json_manifest_the_yaml_parser_cannot_place_still_renders_its_numbers() -> None:
    # YAML refuses a key over 1024 characters that JSON allows: the lines are lost, the values not
    long = "k" * 1100
    text = json.dumps({"jobs": [{"id": "a", "cmd": "x", "args": {long: 1, "lr": 0.5,
                                                                   "ids": [1, 2.5]}}]})
    m = load_manifest_text(text, "m.json")
    assert m.jobs[0].cmd == f"x --{long} 1 --lr 0.5 --ids 1 2.5"


# ---- schema.py: what a type error says it expected and what it got --------------------------

@pytest.mark.parametrize(("text", "key_path", "message"), [
    (JOB + "waves: ~\n", "waves", "expected a string, got nothing (null)"),
    (JOB + "waves: true\n", "waves", "expected a string, got a boolean (True)"),
    (JOB + "waves: 1.5\n", "waves", "expected a string, got a number (1.5)"),
    # YAML reads an unquoted date as a date: named by its type
    (JOB + "waves: 2024-01-01\n", "waves", "expected a string, got date"),
    (JOB + "poll: fast\n", "poll", "expected a number, got a string ('fast')"),
    # a value is shown whole up to 40 characters of repr, else cut to 37 and "..."
    (JOB + f"poll: {'p' * 38}\n", "poll", f"expected a number, got a string ('{'p' * 38}')"),
    (JOB + f"poll: {'p' * 39}\n", "poll", f"expected a number, got a string ('{'p' * 36}...)"),
    ("jobs: [{id: a, cmd: x, exclusive: 1}]\n", "jobs[0].exclusive",
     "expected true or false, got an integer (1)"),
])
def test_type_errors_say_what_was_expected_and_what_was_written(text: str, key_path: str,
                                                                message: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(text, "m.yaml")
    assert (caught.value.key_path, caught.value.message) == (key_path, message)


def test_a_boolean_grid_value_is_written_true_or_false() -> None:
    m = load("grid: {flag: [true, false]}\ntemplate: {cmd: 'x ${flag}'}\n")
    assert [(j.id, j.cmd) for j in m.jobs] == [("flagtrue", "x true"), ("flagfalse", "x false")]
