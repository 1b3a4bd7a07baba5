"""docs/manifest.md's table of the variables a job gets is the environment a real job on a
simulated host has (the rest of manifest.md's checks: tests/unit/manifest/test_manifest_docs.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support.engine_run import job, make_manifest, run_to_end
from tests.unit.manifest.test_manifest_docs import section

pytestmark = pytest.mark.integration


async def test_every_variable_a_job_gets_is_in_the_table(tmp_path: Path) -> None:
    """A real job on a simulated host prints its environment: every EQ_/CUDA_ variable it has
    is a row of manifest.md's table, and every row is in it."""
    manifest = make_manifest(tmp_path, [job("env", "env")])
    code, run = await run_to_end(manifest, tmp_path / "run")
    assert code == 0
    log = Path(run.job("env")["log"]).read_text()
    given = {line.split("=", 1)[0] for line in log.splitlines()
             if re.match(r"(EQ_|CUDA_|PYTHONUNBUFFERED=)", line)}
    table = {name for row in re.findall(r"^\| ((?:`\w+`(?:, )?)+) \|", section("## Variables"),
                                        re.MULTILINE) for name in re.findall(r"`(\w+)`", row)}
    # a name the test's own environment has (EQ_TEST_WORKERS) is inherited, not the engine's
    inherited = {name for name in os.environ if name not in table}
    assert given - inherited == table, ((given - inherited) ^ table)
