"""Results over real OpenSSH hosts: metrics read over each host's one connection when a job
ends (no extra probe: still one per host per tick), and `eq-tui results HOST:RUN_DIR`."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from eq_tui.cli.main import main
from eq_tui.manifest.loader import load_manifest
from eq_tui.results.records import read_records
from tests.support.engine_run import start_engine
from tests.support.sshbed import SshBed

pytestmark = pytest.mark.integration

MANIFEST = """\
project: sshresults
cwd: {work}
hosts:
  - {{name: alpha, ssh: alpha, log_dir: {work}/logs}}
  - {{name: beta, ssh: beta, log_dir: {work}/logs}}
goal: {{val_acc: max}}
grid: {{lr: [0.1, 0.03], seed: [1, 2]}}
template:
  id: "lr${{lr}}_s${{seed}}"
  cmd: "fake-train --epochs 3 --epoch-seconds 0.1 --mem 2000 --lr ${{lr}} --seed ${{seed}}
        --metrics jsonl"
"""


BED_HOSTS = [("alpha", 2, 24576, "NVIDIA RTX 4090 (sim)"),
             ("beta", 2, 24576, "NVIDIA RTX 4090 (sim)")]


def test_metrics_over_ssh_then_results_from_the_host(bed: SshBed, bed_work: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    work = bed_work
    path = tmp_path / "sweep.yaml"
    path.write_text(MANIFEST.format(work=work))
    manifest = load_manifest(path)
    before = {name: (len(h.commands("probe.sh")), len(h.commands("read_metrics.sh")))
              for name, h in bed.hosts.items()}

    async def run_queue() -> tuple[dict[str, int], dict[str, str]]:
        run = await start_engine(manifest, tmp_path / "run", poll=0.3,
                                 ssh_config=str(bed.ssh_config))
        assert run.task is not None
        assert await asyncio.wait_for(run.task, 120) == 0
        return run.engine.probes_by_host, {j["id"]: j["host"] for j in run.state["jobs"]}

    probes, where = asyncio.run(run_queue())
    records = {r["id"]: r for r in read_records(tmp_path / "run") or []}
    assert set(records) == {"lr0.1_s1", "lr0.1_s2", "lr0.03_s1", "lr0.03_s2"}
    for record in records.values():
        assert len(record["series"]["val_acc"]) == 3
        assert record["sources"][0].startswith(f"{work}/logs/")  # the attempt dir, on the host
    for name, host in bed.hosts.items():
        # one probe per host per tick, as before; one read per attempt that ended there
        assert len(host.commands("probe.sh")) - before[name][0] == probes[name]
        ended = sum(1 for job_host in where.values() if job_host == name)
        assert len(host.commands("read_metrics.sh")) - before[name][1] == ended

    # the run dir on a host: `eq-tui results alpha:DIR` reads it over ssh
    remote = work / "run"
    remote.mkdir()
    for name in ("results.jsonl", "manifest.json"):
        shutil.copy(tmp_path / "run" / name, remote / name)
    shutil.chown(remote, "eqtest", "eqtest")
    code = main(["results", f"alpha:{remote}", "--format", "json",
                 "--ssh-config", str(bed.ssh_config)])
    out = capsys.readouterr()
    assert code == 0, out.err
    rows = json.loads(out.out)["rows"]
    assert [(r["params"], r["n"]) for r in rows] == [({"lr": "0.1"}, 2), ({"lr": "0.03"}, 2)]
    assert rows[1]["metrics"]["val_acc"]["best"] is True
    code = main(["results", f"alpha:{work}/nowhere", "--ssh-config", str(bed.ssh_config)])
    assert code == 3 and "no such directory" in capsys.readouterr().err
