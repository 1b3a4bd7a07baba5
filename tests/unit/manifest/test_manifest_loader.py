"""Manifest loading: seed forms, expansion order, and located errors for bad manifests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eq_tui.errors import ManifestError
from eq_tui.manifest.loader import load_manifest, load_manifest_text
from tests.support.manifest_props import VALID_JSON, VALID_YAML, assert_valid_loads, load_checked

EXAMPLES = int(os.environ.get("EQ_HYPOTHESIS_EXAMPLES", "200"))


def load(text: str, name: str = "m.yaml"):  # type: ignore[no-untyped-def]
    return load_manifest_text(text, name)


def test_seed_jobs_with_args_and_default_cmd() -> None:
    m = load("project: p\ndefault_cmd: python run.py --lam 0.5\n"
             "jobs:\n  - {id: s200_N64, args: {seed: 200, n_hidden: 64}}\n")
    assert [(j.id, j.cmd, j.phase) for j in m.jobs] == [
        ("s200_N64", "python run.py --lam 0.5 --seed 200 --n_hidden 64", "main")]
    assert m.hosts[0].name == "local" and m.hosts[0].kind == "local"


def test_grid_template_last_key_fastest() -> None:
    m = load("""
ssh: me@gpu-box-5:2222
default_cmd: python run.py
grid: {N: [64, 128], seed: [42, 200]}
template: {id: "s${seed}_N${N}", args: {seed: "${seed}", n_hidden: "${N}"},
           output_check: "out/s${seed}_N${N}.json"}
""", "sweep.yaml")
    assert [j.id for j in m.jobs] == ["s42_N64", "s200_N64", "s42_N128", "s200_N128"]
    assert m.jobs[0].cmd == "python run.py --seed 42 --n_hidden 64"
    assert m.jobs[0].output_check == "out/s42_N64.json"
    assert m.project == "sweep" and m.hosts[0].ssh == "me@gpu-box-5:2222"
    assert m.hosts[0].name == "gpu-box-5"


def test_phases_dependencies_string_or_list_and_inherited_defaults() -> None:
    m = load("""
project: distill
default_cmd: python x.py
phases:
  - name: teach
    grid: {N: [1, 2]}
    template: {id: "t${N}", args: {N: "${N}"}}
  - name: student
    depends_on: teach
    jobs: [{id: s1}]
  - name: eval
    depends_on: [teach, student]
    on_dependency_failure: run
    jobs: [{id: e1, cmd: "python eval.py --gpu ${GPU} --out ${RUN_DIR}/e1"}]
""")
    assert [(p.name, p.depends_on) for p in m.phases] == [
        ("teach", ()), ("student", ("teach",)), ("eval", ("teach", "student"))]
    assert m.phases[2].on_dependency_failure == "run"
    assert [j.phase for j in m.jobs] == ["teach", "teach", "student", "eval"]
    assert m.jobs[2].cmd == "python x.py"
    assert m.jobs[3].cmd == "python eval.py --gpu ${GPU} --out ${RUN_DIR}/e1"


def test_shell_metacharacters_in_args_are_quoted() -> None:
    m = load("default_cmd: run\njobs:\n  - id: j\n    args:\n"
             "      a: '; touch pwned'\n      b: '$(id)'\n      c: '`id`'\n"
             "      d: \"it's\"\n      e: \"two\\nlines\"\n      f: true\n      g: false\n")
    assert m.jobs[0].cmd == ("run --a '; touch pwned' --b '$(id)' --c '`id`' "
                             "--d 'it'\"'\"'s' --e 'two\nlines' --f")


def test_every_key_is_read() -> None:
    m = load("""
project: full
cwd: /work/exp
conda: dllm
conda_hook: /opt/conda/etc/profile.d/conda.sh
env: {WANDB_MODE: offline, TOKEN: {value: s3cret, secret: true}}
hosts:
  - {name: box1, ssh: box1, gpus: [0, 1], max_parallel: 2, log_dir: ~/eq-logs}
  - {name: sim, gpus: [0, 1], simulate: {gpus: 2, memory_mib: 1000, model: M, linger_s: 1.5}}
  - {name: cluster, slurm: {ssh: login1, partition: gpu, sbatch_args: [--time=01:00:00]}}
  - {name: here, gpus: all}
gpus: [0, 1, 2, 3]
max_parallel: 4
gpu_free_threshold_mib: 800
gpus_per_job: 1
launcher: tmux
waves: strict
oom_retry: {delay: 60, max_attempts: 2}
poll: 1.5
stale_grace_s: 2
retry_delay_s: 10
default_cmd: python run.py
args: {lam: 0.5}
preconditions: [{type: checkpoint_exists, path: "ckpt/${seed}.pt"}]
output_check: "out/${seed}.json"
jobs: [{id: "j${seed}", args: {seed: 7}}]
""")
    job = m.jobs[0]
    assert job.id == "j7" and job.cmd == "python run.py --lam 0.5 --seed 7"
    assert job.output_check == "out/7.json" and job.preconditions[0].path == "ckpt/7.pt"
    assert m.env["TOKEN"].secret and m.to_json()["env"]["TOKEN"]["value"] == "<secret>"
    assert [h.kind for h in m.hosts] == ["ssh", "sim", "slurm", "local"]
    assert m.hosts[0].gpus == (0, 1) and m.hosts[3].gpus is None
    assert m.launcher == "tmux" and m.waves == "strict" and m.poll == 1.5
    assert m.oom_retry.delay == 60 and m.oom_retry.max_attempts == 2
    assert (m.cwd, m.conda, m.conda_hook) == ("/work/exp", "dllm",
                                              "/opt/conda/etc/profile.d/conda.sh")



def test_paths_and_environment_names_written_as_numbers_keep_their_text() -> None:
    m = load("venv: 2024\nconda: 3.10\njobs: [{id: a, cmd: x}]\n")
    assert (m.venv, m.conda, m.cwd) == ("2024", "3.10", None)
    with pytest.raises(ManifestError) as caught:
        load("cwd: [1]\njobs: [{id: a, cmd: x}]\n")
    assert (caught.value.key_path, caught.value.line) == ("cwd", 1)


def test_a_manifest_that_cannot_be_read_says_why(tmp_path: Path) -> None:
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"jobs: \xff\n")
    for path, why in ((tmp_path, "Is a directory"), (binary, "can't decode byte 0xff")):
        with pytest.raises(ManifestError) as caught:
            load_manifest(path)
        assert caught.value.path == str(path)
        assert caught.value.message.startswith("cannot read the manifest: ")
        assert why in caught.value.message


def test_json_manifest(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"project": "js", "jobs": [{"id": "a", "cmd": "true"}]}))
    assert load_manifest(path).jobs[0].cmd == "true"
    path.write_text('{\n  "project": "js",\n  "jobs": [\n    {"id": "a", "cmd": }\n  ]\n}\n')
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    assert ":4:" in str(err.value)


BAD = [
    # (yaml text, expected key path, expected line, words in the message)
    ("jobs: [{id: a, cmd: x}]\nproject: p\nlauncer: tmux\n", "launcer", 3,
     "did you mean 'launcher'"),
    ("jobs:\n  - id: a\n    cmd: x\n    output_chek: o\n", "jobs[0].output_chek", 4,
     "did you mean 'output_check'"),
    ("gpu_free_threshold_mib: lots\njobs: [{id: a, cmd: x}]\n", "gpu_free_threshold_mib", 1,
     "expected an integer, got a string"),
    ("jobs: [{id: a, cmd: x}]\noom_retry: {delay: 5, max_attempts: 0}\n",
     "oom_retry.max_attempts", 2, "at least 1"),
    ("jobs: [{id: a, cmd: x}]\noom_retry: {delay: soon}\n", "oom_retry.delay", 2, "a number"),
    ("jobs:\n  - {id: a, cmd: x}\n  - {id: a, cmd: y}\n", "jobs[1]", 3, "duplicate job id 'a'"),
    ("default_cmd: x\ngrid: {s: [1, 1]}\ntemplate: {id: 'j${s}'}\n", "grid", 2,
     "duplicate job id 'j1'"),
    ("jobs: [{id: 'bad id', cmd: x}]\n", "jobs[0].id", 1, "may only use"),
    ("jobs: [{id: 'a;rm', cmd: x}]\n", "jobs[0].id", 1, "may only use"),
    ("phases:\n  - {name: a, jobs: [{id: j, cmd: x}]}\n  - {name: b, depends_on: c, "
     "jobs: [{id: k, cmd: x}]}\n", "phases[1].depends_on", 3, "unknown phase 'c'"),
    ("phases:\n  - {name: a, jobs: [{id: j, cmd: x}]}\n  - {name: b, depends_on: [a, aa], "
     "jobs: [{id: k, cmd: x}]}\n", "phases[1].depends_on[1]", 3, "unknown phase 'aa'"),
    ("phases:\n  - {name: a, jobs: []}\n  - {name: b, depends_on: a, "
     "jobs: [{id: k, cmd: x}]}\n", "phases[1].depends_on", 3, "has no jobs"),
    ("phases:\n  - {name: a, depends_on: b, jobs: [{id: j, cmd: x}]}\n"
     "  - {name: b, depends_on: a, jobs: [{id: k, cmd: x}]}\n", "phases[1].depends_on", 3,
     "dependency cycle: a → b → a"),
    ("phases:\n  - {name: a, depends_on: a, jobs: [{id: j, cmd: x}]}\n",
     "phases[0].depends_on", 2, "dependency cycle"),
    ("default_cmd: x\ngrid: {N: [1]}\ntemplate:\n  id: 'j${N}'\n  output_check: 'o/${M}'\n",
     "template.output_check", 5, "undefined variable ${M}"),
    ("jobs: [{id: a, cmd: 'echo ${HOME}'}]\n", "jobs[0].cmd", 1, "$${HOME}"),
    ("jobs: [{id: a}]\n", "jobs[0]", 1, "no 'cmd'"),
    ("project: p\n", "", None, "no jobs"),
    ("", "", None, "empty"),
    ("- a\n- b\n", "", 1, "expected a mapping"),
    ("jobs: [{id: a, cmd: x}\n", "", None, "invalid YAML"),
    ("project: p\nproject: q\njobs: [{id: a, cmd: x}]\n", "project", 2, "duplicate key"),
    ("ssh: a\nhosts: [{name: b}]\njobs: [{id: a, cmd: x}]\n", "hosts", 2, "not both"),
    ("hosts:\n  - {name: a}\n  - {name: a}\njobs: [{id: a, cmd: x}]\n", "hosts[1].name", 3,
     "used twice"),
    ("hosts:\n  - {name: a, gpus: [0, x]}\njobs: [{id: a, cmd: x}]\n", "hosts[0].gpus[1]", 2,
     "an integer"),
    ("hosts:\n  - {name: s, simulate: {gpus: 2}}\njobs: [{id: a, cmd: x, gpus_per_job: 3}]\n",
     "jobs[0]", 3, "needs 3 GPUs"),
    ("launcher: byobu\njobs: [{id: a, cmd: x}]\n", "launcher", 1, "screen, tmux"),
    ("waves: strcit\njobs: [{id: a, cmd: x}]\n", "waves", 1, "did you mean 'strict'"),
    ("env: {'BAD-NAME': x}\njobs: [{id: a, cmd: x}]\n", "env.BAD-NAME", 1, "not a valid"),
    ("grid: {N: [1]}\njobs: [{id: a, cmd: x}]\nphases: [{name: p, jobs: [{id: b, cmd: y}]}]\n",
     "jobs", 2, "cannot be combined"),
    ("template: {id: a, cmd: x}\n", "template", 1, "needs a 'grid'"),
    ("jobs: [{id: a, cmd: x, args: {'--x; rm': 1}}]\n", "jobs[0].args.--x; rm", 1,
     "argument name"),
    ("poll: 0\njobs: [{id: a, cmd: x}]\n", "poll", 1, "greater than 0"),
    ("project: 'a b'\njobs: [{id: a, cmd: x}]\n", "project", 1, "may only use"),
]


@pytest.mark.parametrize(("text", "key_path", "line", "words"), BAD,
                         ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_manifests_name_the_key_and_line(text: str, key_path: str, line: int | None,
                                             words: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load(text)
    err = caught.value
    assert words in err.message, str(err)
    assert err.key_path == key_path, str(err)
    if line is not None:
        assert err.line == line, str(err)
        assert str(err).startswith(f"m.yaml:{line}:")
    assert err.exit_code == 2


def test_bad_manifest_through_the_binary_exits_2_without_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("jobs: [{id: a, cmd: x}]\nlauncer: tmux\n")
    result = subprocess.run([sys.executable, "-m", "eq_tui", str(path), "--no-ui"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert f"{path}:2: launcer: unknown key 'launcer'; did you mean 'launcher'?" in result.stderr
    assert "Traceback" not in result.stderr


yaml_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=8),
                         st.floats(allow_nan=False, allow_infinity=False))
near_miss_keys = st.sampled_from(["project", "jobs", "grid", "template", "phases", "hosts",
                                  "ssh", "gpus", "oom_retry", "default_cmd", "args", "id", "cmd",
                                  "name", "depends_on", "output_check", "simulate", "launcher",
                                  "waves", "poll", "env", "jbos", "prject", "${x}"])
trees = st.recursive(yaml_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(near_miss_keys, inner, max_size=5)),
    max_leaves=25)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees)
def test_arbitrary_structures_give_a_plan_or_a_clean_error(tree: object) -> None:
    load_checked(json.dumps(tree), "m.json")
    assert_valid_loads(VALID_JSON, "m.json")


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_gives_a_plan_or_a_clean_error(text: str) -> None:
    load_checked(text, "m.yaml")
    assert_valid_loads(VALID_YAML, "m.yaml")


def test_the_fuzz_properties_reject_a_loader_that_refuses_everything(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A loader that answers every input with a clean, located ManifestError passes the
    negative half of the fuzz properties; the positive half (a valid base loads) fails it."""
    import tests.support.manifest_props as props

    def refuses(_text: str, source: str) -> None:
        raise ManifestError("no jobs", path=source)

    monkeypatch.setattr(props, "load_manifest_text", refuses)
    assert isinstance(props.load_checked("[", "m.yaml"), ManifestError)  # passes alone
    with pytest.raises(ManifestError):
        props.assert_valid_loads()


def test_the_fuzz_property_rejects_a_loader_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loader that raises KeyError everywhere must fail the fuzz tests: its ManifestError
    says "internal error", which load_checked does not accept."""
    import eq_tui.manifest.loader as loader

    def broken(*_args: object) -> None:
        raise KeyError("jobs")

    monkeypatch.setattr(loader, "_build", broken)
    with pytest.raises(AssertionError, match="internal error"):
        load_checked("jobs: [{id: a, cmd: x}]\n", "m.yaml")


# ---- yaml_lines.py: where a parse error is, and what it says ---------------------------------

@pytest.mark.parametrize(("text", "source", "rendered"), [
    ("jobs:\n  - id: a\n    cmd: x\n    cmd: y\n", "m.yaml",
     "m.yaml:4: jobs[0].cmd: duplicate key 'cmd' (first on line 3)"),
    ('{\n  "jobs": [{"id": "a", "cmd": "x"}],\n  "jobs": []\n}', "m.json",
     "m.json:3: jobs: duplicate key 'jobs' (first on line 2)"),
    # PyYAML's problem, not its context ("while parsing a flow node")
    ("jobs: [\n", "m.yaml",
     "m.yaml:2: invalid YAML: expected the node content, but found '<stream end>'"),
    ("jobs: [{id: a, cmd: x}]\nwaves: *nope\n", "m.yaml",
     "m.yaml:2: invalid YAML: found undefined alias 'nope'"),
    # the line of a character the reader refuses counts every newline before it, the first too
    ("\njobs: [{id: a, cmd: x}]\ncwd: \x07\n", "m.yaml",
     "m.yaml:3: invalid YAML: unacceptable character #x0007"),
    ("[" * 100_000 + "]" * 100_000, "m.json", "m.json: the manifest nests too deeply"),
], ids=lambda value: value[:60] if isinstance(value, str) else None)  # short node ids: pytest
# puts the running test's id in PYTEST_CURRENT_TEST, and an id of 200,000 characters makes every
# subprocess started meanwhile (a session fixture's teardown) fail with "Argument list too long"
def test_parse_errors_say_where_and_what(text: str, source: str, rendered: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(text, source)
    assert str(caught.value) == rendered


def test_a_json_manifest_the_yaml_parser_cannot_place_puts_its_errors_on_line_1() -> None:
    # YAML refuses a key over 1024 characters that JSON allows
    long = "k" * 1100
    text = json.dumps({"jobs": [{"id": "a", "cmd": "x", "args": {long: 1}}], "waves": 3})
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(text, "m.json")
    assert str(caught.value) == "m.json:1: waves: expected a string, got an integer (3)"


# ---- no silent waste: jobs of a phase that would run the same command ----------------------

UNUSED_WD = """\
default_cmd: python train.py
grid: {lr: [0.1, 0.01], seed: [1, 2], wd: [0.0, 0.1]}
template:
  args: {lr: "${lr}", seed: "${seed}"}
"""


def refused(text: str) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        load(text)
    return caught.value


def test_a_grid_variable_no_command_uses_is_refused_at_its_key_with_the_copies() -> None:
    error = refused(UNUSED_WD)
    assert (error.line, error.key_path) == (2, "grid.wd")
    assert error.message.startswith("grid variable 'wd' (0.0, 0.1) is used by no command of "
                                    "its jobs: 4 of the phase's 8 jobs would be copies")
    # used anywhere in what runs, it is no waste: in the command, or through an arg
    assert len(load(UNUSED_WD.replace("python train.py", "python train.py --wd ${wd}")).jobs) == 8
    assert len(load(UNUSED_WD.replace('seed: "${seed}"', 'seed: "${seed}", wd: "${wd}"')).jobs) \
        == 8


def test_a_variable_only_in_a_launch_time_name_or_the_id_still_makes_copies() -> None:
    error = refused("grid: {n: [1, 2, 3]}\ntemplate: {id: 'j${n}', cmd: 'run --out ${JOB_ID}'}\n")
    assert (error.key_path, error.line) == ("grid.n", 1)
    assert "2 of the phase's 3 jobs would be copies" in error.message


def test_in_a_phase_the_error_points_into_that_phase() -> None:
    error = refused("phases:\n  - name: a\n    jobs: [{id: x, cmd: run}]\n  - name: b\n"
                    "    grid: {lr: [1, 2], bs: [8, 16]}\n    template: {cmd: 'run ${lr}'}\n")
    assert (error.key_path, error.line) == ("phases[1].grid.bs", 5)
    assert error.message.startswith("grid variable 'bs' (8, 16) is used by no command")
    assert "2 of the phase's 4 jobs" in error.message


def test_seeds_that_no_command_uses_are_meant_repeats() -> None:
    m = load("grid: {lr: [1, 2], seed: [1, 2, 3]}\ntemplate: {cmd: 'run --lr ${lr}'}\n")
    assert len(m.jobs) == 6
    # the phase's group_over names its seed key
    renamed = "grid: {lr: [1, 2], rep: [1, 2]}\ntemplate: {cmd: 'run --lr ${lr}'}\n"
    assert "'rep'" in refused(renamed).message
    assert len(load("group_over: rep\n" + renamed).jobs) == 4


def test_two_written_jobs_alike_are_refused_at_the_second_with_both_ids() -> None:
    error = refused("jobs:\n  - {id: a, cmd: run}\n  - {id: b, cmd: run}\n")
    assert (error.key_path, error.line) == ("jobs[1]", 3)
    assert error.message.startswith("jobs 'a' and 'b' of phase main run the same command (run)")
    assert "1 job(s) of the phase would be copies" in error.message
    # the same command in two phases is no copy (a phase may rerun another's on new inputs)
    two = load("phases:\n  - name: a\n    jobs: [{id: a, cmd: run}]\n"
               "  - name: b\n    jobs: [{id: b, cmd: run}]\n")
    assert [j.id for j in two.jobs] == ["a", "b"]


def test_a_grid_point_that_repeats_a_written_job_is_refused() -> None:
    error = refused("jobs: [{id: a, cmd: run 1}]\ngrid: {n: [1, 2]}\n"
                    "template: {cmd: 'run ${n}'}\n")
    assert error.message.startswith("jobs 'a' and 'n1' of phase main run the same command")
    assert error.key_path == "grid"


def test_a_long_command_is_shortened_in_the_message() -> None:
    long = "run " + "x" * 100
    error = refused(f"jobs:\n  - {{id: a, cmd: {long}}}\n  - {{id: b, cmd: {long}}}\n")
    assert f"({long[:77]}...)" in error.message
    short = "run " + "x" * 76  # 80 characters: shown whole
    assert f"({short})" in refused(f"jobs:\n  - {{id: a, cmd: {short}}}\n  - {{id: b, cmd: "
                                   f"{short}}}\n").message


def test_the_dry_run_refuses_waste_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(UNUSED_WD)
    done = subprocess.run([sys.executable, "-m", "eq_tui", "m.yaml", "--dry-run"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "m.yaml:2: grid.wd: grid variable 'wd'" in done.stderr
    assert not (tmp_path / "experiment_queue").exists()
