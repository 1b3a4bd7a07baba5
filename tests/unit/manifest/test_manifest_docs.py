"""docs/manifest.md describes every key of the schema, in the section of the place it goes,
the README links only to files inside the repository, and its manifest example loads with the
keys its table names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from eq_tui.manifest import json_schema
from eq_tui.manifest.expand import LAUNCH_TIME_VARS
from eq_tui.manifest.loader import load_manifest_text

ROOT = Path(__file__).resolve().parent.parent.parent.parent
DOC = (ROOT / "docs" / "manifest.md").read_text(encoding="utf-8")

# where each part of the schema is described: the heading of its section in docs/manifest.md
SECTIONS = {"top": "## Top level", "host": "## Hosts", "simulate": "### simulate",
            "slurm": "### slurm", "env_var": "## env and secrets", "oom_retry": "## oom_retry",
            "job": "## Jobs and templates", "template": "## Jobs and templates",
            "precondition": "### preconditions", "phase": "## Phases",
            "metrics": "### metrics", "crash_guard": "### crash_guard",
            "notify": "### notify", "early_stop": "### early_stop",
            "checkpoint": "### checkpoint", "search": "### search",
            "search_range": "#### search ranges"}


def section(heading: str) -> str:
    """The text under `heading` up to the next heading of any level."""
    start = DOC.index(heading + "\n") + len(heading)
    end = re.search(r"^#{2,6} ", DOC[start:], re.MULTILINE)
    return DOC[start:start + end.start()] if end else DOC[start:]


def documented_keys(text: str) -> set[str]:
    """Keys in the first cell of a table row: `| `key` |` or `| `a`, `b` |`."""
    keys: set[str] = set()
    for line in text.splitlines():
        match = re.match(r"\| ((?:`[^`]+`(?:, )?)+) \|", line)
        if match:
            keys.update(re.findall(r"`([^`]+)`", match.group(1)))
    return keys


def schema_keys(where: str) -> frozenset[str]:
    if where == "env_var":
        return json_schema.env_var_keys()
    return json_schema.keys(where)


def test_every_part_of_the_schema_has_a_section() -> None:
    assert set(SECTIONS) == {"top", *json_schema.SCHEMA["$defs"]}


@pytest.mark.parametrize("where", sorted(SECTIONS))
def test_every_key_is_described_where_it_goes(where: str) -> None:
    described = documented_keys(section(SECTIONS[where]))
    missing = schema_keys(where) - described
    assert not missing, f"docs/manifest.md {SECTIONS[where]!r} does not describe {missing}"
    unknown = described - schema_keys(where) - ({"${" + v + "}" for v in LAUNCH_TIME_VARS})
    assert not unknown, f"docs/manifest.md {SECTIONS[where]!r} describes unknown keys {unknown}"


def test_launch_time_variables_and_job_environment_are_described() -> None:
    variables = section("## Variables")
    for name in LAUNCH_TIME_VARS:
        assert f"`${{{name}}}`" in variables
    for name in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PYTHONUNBUFFERED", "EQ_JOB_ID",
                 "EQ_ATTEMPT", "EQ_PROJECT", "EQ_RUN_DIR", "EQ_ATTEMPT_DIR"):
        assert f"| `{name}` |" in variables


def test_the_variables_results_md_fills_in_metrics_paths_are_listed_for_them() -> None:
    """results.md: `${RUN_DIR}`, `${JOB_ID}` and `${ATTEMPT}` are filled in metrics paths; the
    variables table of manifest.md says where each variable goes."""
    results = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    filled = re.search(r"((?:`\$\{\w+\}`(?:, | and )?)+) when the job ends", results)
    assert filled is not None
    names = re.findall(r"\$\{(\w+)\}", filled.group(1))
    assert sorted(names) == ["ATTEMPT", "JOB_ID", "RUN_DIR"]
    rows = {row.split("|")[1].strip(): row for row in section("## Variables").splitlines()
            if row.startswith("| `${")}
    for name in names:
        assert "`metrics` paths" in rows[f"`${{{name}}}`"], name


def test_max_parallel_has_one_default_that_says_what_unset_means() -> None:
    row = next(line for line in section("## Top level").splitlines()
               if line.startswith("| `max_parallel` |"))
    default = row.split("|")[3]
    assert "unset" in default and "8" in default and "memory" in default, default


def test_docs_say_a_quarantined_gpu_waits_for_its_release() -> None:
    for doc in ("README.md", "docs/reliability.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        assert "launches on it again" not in text, doc
        assert "until you release it" in text, doc


def test_readme_links_stay_inside_the_repository() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert "docs/manifest.md" in links
    for link in links:
        if re.match(r"[a-z]+://|#", link):
            continue
        target = (ROOT / link.split("#")[0]).resolve()
        assert target.is_relative_to(ROOT) and target.exists(), link


def test_the_readme_manifest_example_loads_and_its_table_names_top_level_keys() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    part = readme[readme.index("## The main manifest keys"):]
    example = re.search(r"```yaml\n(.*?)```", part, re.DOTALL)
    assert example is not None
    manifest = load_manifest_text(example.group(1), "README.md")
    assert len(manifest.jobs) == 6 and {host.kind for host in manifest.hosts} == {"ssh"}
    start = part.index("| key |")
    rows = part[start:part.index("\n\n", start)].splitlines()[2:]
    keys = {key for row in rows for key in re.findall(r"`([^`]+)`", row.split("|")[1])}
    assert len(keys) >= 20 and keys <= json_schema.keys("top"), keys - json_schema.keys("top")
