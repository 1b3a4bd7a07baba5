"""The manifest keys for sharing GPUs: mem_mib and exclusive at every scope, gpus_per_job 0,
the host keys max_jobs_per_gpu and max_cpu_jobs, the top level's gpu_margin_mib, and a job's
family."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import jsonschema
import pytest

from eq_tui.errors import ManifestError
from eq_tui.manifest.json_schema import SCHEMA
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import HostSpec, JobSpec, Manifest

DOC = Path(__file__).resolve().parent.parent.parent.parent / "docs" / "manifest.md"


def load(text: str) -> Manifest:
    return load_manifest_text(textwrap.dedent(text), "m.yaml")


def refused(text: str) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        load(text)
    error = caught.value
    assert error.exit_code == 2 and "internal error" not in str(error), str(error)
    assert str(error).startswith(f"m.yaml:{error.line}: {error.key_path}: ")
    return error


def sharing(m: Manifest) -> dict[str, tuple[int, int | str | None, bool]]:
    return {s.id: (s.gpus_per_job, s.mem_mib, s.exclusive) for s in m.jobs}


def test_without_the_keys_a_manifest_loads_as_before() -> None:
    m = load("""
        project: p
        hosts: [{name: a}]
        jobs: [{id: j, cmd: x}]
        """)
    assert m.jobs[0] == JobSpec(id="j", phase="main", cmd="x")
    assert sharing(m) == {"j": (1, None, False)}
    assert m.hosts == (HostSpec(name="a"),)
    assert (m.hosts[0].max_jobs_per_gpu, m.hosts[0].max_cpu_jobs) == (None, None)
    assert (m.gpu_margin_mib, m.mem_mib, m.exclusive) == (1024, None, False)


def test_mem_mib_and_exclusive_at_every_scope_the_nearest_wins() -> None:
    m = load("""
        project: p
        mem_mib: auto
        exclusive: true
        phases:
          - name: a
            jobs:
              - {id: a1, cmd: x1}
              - {id: a2, cmd: x2, mem_mib: 18000, exclusive: false}
          - name: b
            mem_mib: 9000
            exclusive: false
            grid: {s: [1]}
            template: {id: "b${s}", cmd: x}
            jobs: [{id: b0, cmd: y, mem_mib: null, exclusive: null}]
          - name: c
            grid: {s: [1]}
            template: {id: "c${s}", cmd: x, mem_mib: 500, exclusive: true}
        """)
    assert sharing(m) == {"a1": (1, "auto", True), "a2": (1, 18000, False),
                          "b0": (1, 9000, False),  # null: not given, so the phase's
                          "b1": (1, 9000, False), "c1": (1, 500, True)}
    assert (m.mem_mib, m.exclusive) == ("auto", True)  # what a job added at run time gets


def test_top_level_keys_reach_jobs_without_phases() -> None:
    m = load("""
        mem_mib: 4000
        grid: {s: [1]}
        template: {cmd: x, exclusive: true}
        jobs: [{id: j, cmd: y, mem_mib: auto}]
        """)
    assert sharing(m) == {"j": (1, "auto", False), "s1": (1, 4000, True)}


def test_family_is_the_template_or_the_phase() -> None:
    m = load("""
        project: p
        phases:
          - name: a
            jobs: [{id: explicit, cmd: y}]
            grid: {s: [1]}
            template: {cmd: x}
          - name: b
            jobs: [{id: other, cmd: x}]
        """)
    assert {s.id: s.family for s in m.jobs} == {"explicit": "a", "s1": "a/template",
                                                "other": "b"}
    flat = load("grid: {s: [1]}\ntemplate: {cmd: x}\njobs: [{id: j, cmd: y}]\n")
    assert {s.id: s.family for s in flat.jobs} == {"j": "main", "s1": "main/template"}
    assert JobSpec(id="x", phase="q", cmd="y").family == "q"  # made in code: its phase's


def test_gpus_per_job_0_is_a_cpu_job_at_every_scope() -> None:
    m = load("""
        gpus_per_job: 0
        hosts: [{name: s, simulate: {gpus: 1}}]
        phases:
          - name: a
            jobs: [{id: a1, cmd: x1}, {id: a2, cmd: x2, gpus_per_job: 1}]
          - name: b
            gpus_per_job: 1
            grid: {s: [1]}
            template: {cmd: x, gpus_per_job: 0}
        """)
    assert sharing(m) == {"a1": (0, None, False), "a2": (1, None, False),
                          "s1": (0, None, False)}
    assert m.gpus_per_job == 0


def test_a_nearer_gpus_per_job_0_drops_an_inherited_mem_mib_and_exclusive() -> None:
    m = load("""
        mem_mib: auto
        exclusive: true
        phases:
          - name: prep
            gpus_per_job: 0
            jobs: [{id: p, cmd: x}]
          - name: train
            jobs: [{id: t, cmd: x}, {id: cpu, cmd: y, gpus_per_job: 0}]
        """)
    assert sharing(m) == {"p": (0, None, False), "t": (1, "auto", True),
                          "cpu": (0, None, False)}


@pytest.mark.parametrize(("text", "key_path", "line"), [
    ("jobs:\n  - {id: a, cmd: x, gpus_per_job: 0, mem_mib: 5}\n", "jobs[0].mem_mib", 2),
    ("jobs:\n  - {id: a, cmd: x, gpus_per_job: 0, mem_mib: auto}\n", "jobs[0].mem_mib", 2),
    ("gpus_per_job: 0\nmem_mib: 100\njobs: [{id: a, cmd: x}]\n", "mem_mib", 2),
    ("gpus_per_job: 0\nphases:\n  - name: a\n    mem_mib: auto\n    jobs: [{id: a, cmd: x}]\n",
     "phases[0].mem_mib", 4),
    ("phases:\n  - name: a\n    gpus_per_job: 0\n    grid: {s: [1]}\n"
     "    template: {cmd: x, mem_mib: 10}\n", "phases[0].template.mem_mib", 5),
])
def test_gpu_memory_for_a_job_that_takes_no_gpu_is_refused(text: str, key_path: str,
                                                             line: int) -> None:
    error = refused(text)
    assert (error.key_path, error.line) == (key_path, line)
    assert "GPU memory for a job that takes no GPU" in error.message
    assert "gpus_per_job is 0" in error.message


@pytest.mark.parametrize(("text", "key_path", "line"), [
    ("jobs:\n  - {id: a, cmd: x, gpus_per_job: 0, exclusive: true}\n", "jobs[0].exclusive", 2),
    ("exclusive: true\ngpus_per_job: 0\njobs: [{id: a, cmd: x}]\n", "exclusive", 1),
])
def test_exclusive_for_a_job_that_takes_no_gpu_is_refused(text: str, key_path: str,
                                                          line: int) -> None:
    error = refused(text)
    assert (error.key_path, error.line) == (key_path, line)
    assert "exclusive GPUs for a job that takes no GPU" in error.message


def test_exclusive_false_on_a_cpu_job_is_fine() -> None:
    m = load("jobs:\n  - {id: a, cmd: x, gpus_per_job: 0, exclusive: false}\n")
    assert sharing(m) == {"a": (0, None, False)}


@pytest.mark.parametrize("value", ["0", "-5", "18GB", "true", "1.5", "'18000'", "AUTO", "[1]"])
@pytest.mark.parametrize("where", ["top", "phase", "template", "job"])
def test_bad_mem_mib_is_named_with_its_key_path_and_line(value: str, where: str) -> None:
    text, key_path, line = {
        "top": (f"mem_mib: {value}\njobs: [{{id: a, cmd: x}}]\n", "mem_mib", 1),
        "phase": (f"phases:\n  - name: a\n    mem_mib: {value}\n    jobs: [{{id: a, cmd: x}}]\n",
                  "phases[0].mem_mib", 3),
        "template": (f"grid: {{s: [1]}}\ntemplate:\n  cmd: x\n  mem_mib: {value}\n",
                     "template.mem_mib", 4),
        "job": (f"jobs:\n  - id: a\n    cmd: x\n    mem_mib: {value}\n", "jobs[0].mem_mib", 4),
    }[where]
    error = refused(text)
    assert (error.key_path, error.line) == (key_path, line)
    assert error.message.startswith(
        "must be a whole number of MiB (e.g. 18000) or auto, got "), error.message


@pytest.mark.parametrize(("value", "shown"), [("0", "an integer (0)"),
                                              ("18GB", "a string ('18GB')")])
def test_a_bad_mem_mib_says_what_was_written(value: str, shown: str) -> None:
    text = f"jobs:\n  - {{id: a, cmd: x, mem_mib: {value}}}\n"
    assert refused(text).message.endswith(f", got {shown}")


def test_the_smallest_mem_mib_is_1() -> None:
    assert sharing(load("jobs:\n  - {id: a, cmd: x, mem_mib: 1}\n")) == {"a": (1, 1, False)}


@pytest.mark.parametrize(("text", "key_path", "words"), [
    ("exclusive: yes please\njobs: [{id: a, cmd: x}]\n", "exclusive", "expected true or false"),
    ("jobs:\n  - {id: a, cmd: x, exclusive: 1}\n", "jobs[0].exclusive", "expected true or false"),
    ("gpus_per_job: -1\njobs: [{id: a, cmd: x}]\n", "gpus_per_job", "at least 0"),
    ("jobs:\n  - {id: a, cmd: x, gpus_per_job: -1}\n", "jobs[0].gpus_per_job", "at least 0"),
    ("gpu_margin_mib: -1\njobs: [{id: a, cmd: x}]\n", "gpu_margin_mib", "at least 0"),
    ("gpu_margin_mib: 1GB\njobs: [{id: a, cmd: x}]\n", "gpu_margin_mib", "expected an integer"),
    ("max_jobs_per_gpu: 0\njobs: [{id: a, cmd: x}]\n", "max_jobs_per_gpu", "at least 1"),
    ("max_cpu_jobs: -1\njobs: [{id: a, cmd: x}]\n", "max_cpu_jobs", "at least 0"),
    ("jobs: [{id: a, cmd: x}]\nhosts:\n  - {name: h, max_jobs_per_gpu: 0}\n",
     "hosts[0].max_jobs_per_gpu", "at least 1"),
    ("jobs: [{id: a, cmd: x}]\nhosts:\n  - {name: h, max_cpu_jobs: many}\n",
     "hosts[0].max_cpu_jobs", "expected an integer"),
    ("jobs: [{id: a, cmd: x}]\nhosts:\n  - {name: h, max_jobs_per_gpus: 2}\n",
     "hosts[0].max_jobs_per_gpus", "did you mean 'max_jobs_per_gpu'"),
    ("jobs:\n  - {id: a, cmd: x, mem_mb: 5}\n", "jobs[0].mem_mb", "did you mean 'mem_mib'"),
])
def test_bad_values_of_the_other_keys_are_named(text: str, key_path: str, words: str) -> None:
    error = refused(text)
    assert error.key_path == key_path and words in error.message, str(error)
    assert error.line is not None


def test_host_keys_with_top_level_defaults() -> None:
    m = load("""
        max_jobs_per_gpu: 3
        max_cpu_jobs: 6
        gpu_margin_mib: 0
        jobs: [{id: a, cmd: x}]
        hosts:
          - {name: a}
          - {name: b, max_jobs_per_gpu: 1, max_cpu_jobs: 0}
          - {name: c, max_jobs_per_gpu: null}
        """)
    assert [(h.max_jobs_per_gpu, h.max_cpu_jobs) for h in m.hosts] == [(3, 6), (1, 0), (3, 6)]
    assert m.gpu_margin_mib == 0
    for seed in ("ssh: box\n", ""):  # the one-host forms take the top-level values too
        one = load(f"{seed}max_jobs_per_gpu: 2\nmax_cpu_jobs: 1\njobs: [{{id: a, cmd: x}}]\n")
        assert [(h.max_jobs_per_gpu, h.max_cpu_jobs) for h in one.hosts] == [(2, 1)]


def test_a_cpu_job_fits_any_host_and_the_gpu_count_check_still_holds() -> None:
    m = load("hosts: [{name: s, simulate: {gpus: 1}}]\njobs: [{id: a, cmd: x, gpus_per_job: 0}]\n")
    assert m.jobs[0].gpus_per_job == 0
    error = refused("hosts: [{name: s, simulate: {gpus: 1}}]\n"
                    "jobs: [{id: a, cmd: x, gpus_per_job: 2}]\n")
    assert "needs 2 GPUs" in error.message


def test_the_example_in_the_docs_loads() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Sharing GPUs"):text.index("## Phases")]
    example = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert example is not None
    m = load(example.group(1))
    assert sharing(m)["tokenize"] == (0, None, False)
    assert sharing(m)["big"] == (1, 60000, False)
    assert {s.family for s in m.jobs} == {"prep", "sweep", "sweep/template"}


@pytest.mark.parametrize(("document", "valid"), [
    ({"mem_mib": "auto", "exclusive": True, "gpu_margin_mib": 0, "max_cpu_jobs": 0,
      "jobs": [{"id": "a", "cmd": "x", "mem_mib": 18000, "gpus_per_job": 2}]}, True),
    ({"hosts": [{"name": "h", "max_jobs_per_gpu": 2, "max_cpu_jobs": None}],
      "phases": [{"name": "p", "gpus_per_job": 0, "jobs": [{"id": "a", "cmd": "x"}]}]}, True),
    ({"mem_mib": "18GB", "jobs": [{"id": "a", "cmd": "x"}]}, False),
    ({"jobs": [{"id": "a", "cmd": "x", "mem_mib": 0}]}, False),
    ({"jobs": [{"id": "a", "cmd": "x", "mem_mib": True}]}, False),
    ({"jobs": [{"id": "a", "cmd": "x", "gpus_per_job": -1}]}, False),
    ({"gpu_margin_mib": -1, "jobs": [{"id": "a", "cmd": "x"}]}, False),
    ({"hosts": [{"name": "h", "max_jobs_per_gpu": 0}], "jobs": [{"id": "a", "cmd": "x"}]},
     False),
])
def test_the_schema_agrees_with_the_loader_on_the_sharing_keys(document: dict[str, object],
                                                               valid: bool) -> None:
    errors = list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(document))
    assert (not errors) == valid, errors
    if valid:
        load_manifest_text(json.dumps(document), "m.json")
    else:
        with pytest.raises(ManifestError):
            load_manifest_text(json.dumps(document), "m.json")
