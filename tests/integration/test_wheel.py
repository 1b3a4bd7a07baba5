"""The install a user gets: build the wheel, install it into a clean venv (no checkout on its
path), and run the demo from there: the themes, the host scripts, the simulator and the
schema must all be inside the wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parent.parent.parent


def run(*args: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_the_wheel_installs_into_a_clean_venv_and_runs_the_demo(tmp_path: Path) -> None:
    built = run(sys.executable, "-m", "build", "--wheel", "--outdir", tmp_path / "dist", ROOT,
                cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("eq_tui-*.whl")
    venv.create(tmp_path / "venv", with_pip=True)
    bin_dir = tmp_path / "venv" / "bin"
    installed = run(bin_dir / "python", "-m", "pip", "install", "--quiet", wheel, cwd=tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    eq_tui = bin_dir / "eq-tui"
    where = run(bin_dir / "python", "-c", "import eq_tui; print(eq_tui.__file__)", cwd=tmp_path)
    assert where.stdout.startswith(str(tmp_path / "venv")), where.stdout  # not the checkout
    remote = sorted(p.name for p in (ROOT / "eq_tui" / "cli" / "remote" / "scripts").glob("*.sh"))
    shipped = run(bin_dir / "python", "-c", "import sys; from eq_tui.cli.remote.shell import "
                  "remote_script; [remote_script(n) for n in sys.argv[1:]]", *remote, cwd=tmp_path)
    assert remote and shipped.returncode == 0, shipped.stderr  # the shell run over ssh

    work = tmp_path / "work"
    work.mkdir()
    # the demo's manifest with its sleeps shortened (the outcome does not depend on them: the
    # same as tests/integration/test_readme_promises.py)
    text = (ROOT / "sample_manifests" / "demo.yaml").read_text()
    short = text.replace("--epoch-seconds 1", "--epoch-seconds 0.2").replace("delay: 8", "delay: 1")
    assert short.count("--epoch-seconds 0.2") > 1 and "delay: 1" in short
    (work / "demo.yaml").write_text(short)
    demo = run(eq_tui, "demo.yaml", "--no-ui", "--poll", "0.5", cwd=work)
    assert demo.returncode == 1, demo.stdout[-3000:] + demo.stderr[-3000:]  # one job stuck
    state = json.loads((work / "experiment_queue" / "demo" / "queue_state.json").read_text())
    statuses = [job["status"] for job in state["jobs"]]
    assert statuses.count("completed") == 19 and statuses.count("stuck") == 1

    completion = run(eq_tui, "completion", "bash", cwd=work)
    assert completion.returncode == 0 and "eq-dark" in completion.stdout  # themes are there
    made = run(eq_tui, "init", "--cmd", "python t.py --seed {1..2}", "-o", "new.yaml", cwd=work)
    assert made.returncode == 0, made.stderr
    first = (work / "new.yaml").read_text().splitlines()[0]
    schema = Path(first.split("$schema=", 1)[1])
    assert schema.is_relative_to(tmp_path / "venv") and schema.is_file()
    printed = run(eq_tui, "schema", cwd=work)
    assert printed.stdout == schema.read_text()
