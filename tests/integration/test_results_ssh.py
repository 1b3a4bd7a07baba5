"""Results over real OpenSSH hosts: a job's metrics ride on the probe that sees it end (no
command of their own, no extra probe: still one per host per tick); a job that ends without a
probe seeing its exit (a person's kill) has them read over the host's one connection; and
`eq-tui results HOST:RUN_DIR`."""

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
    assert set(where.values()) == {"alpha", "beta"}
    for name, host in bed.hosts.items():
        # one probe per host per tick, as before; the metrics came with the probes that saw
        # the exits: no command of their own
        assert len(host.commands("probe.sh")) - before[name][0] == probes[name]
        assert len(host.commands("read_metrics.sh")) - before[name][1] == 0

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


KILLED = """\
project: sshkilled
cwd: {work}
hosts:
  - {{name: alpha, ssh: alpha, log_dir: {work}/logs}}
jobs:
  - {{id: long, cmd: "fake-train --epochs 200 --epoch-seconds 0.1 --mem 2000 --metrics jsonl"}}
  - {{id: short, cmd: "fake-train --epochs 2 --epoch-seconds 0.1 --mem 2000 --metrics jsonl"}}
"""


def test_a_killed_jobs_metrics_are_read_over_the_connection(bed: SshBed, bed_work: Path,
                                                             tmp_path: Path) -> None:
    """No probe saw the killed job's exit (the kill ended it): its metrics so far are read by
    one read_metrics.sh; the job that ended by itself still needs none."""
    path = tmp_path / "killed.yaml"
    path.write_text(KILLED.format(work=bed_work))
    manifest = load_manifest(path)
    alpha = bed.hosts["alpha"]
    before = len(alpha.commands("read_metrics.sh"))

    async def run_queue() -> None:
        run = await start_engine(manifest, tmp_path / "run", poll=0.3,
                                 ssh_config=str(bed.ssh_config))
        assert run.task is not None

        def long_reported() -> bool:
            current = run.job("long").get("history") or []
            return bool(current) and (Path(current[-1]["attempt_dir"])
                                      / "results.jsonl").exists()

        await run.wait_for(long_reported, timeout=60)
        await run.wait_for(lambda: run.status("short") == "completed", timeout=60)
        assert (await run.engine.command("kill", ["long"]))["ok"]
        assert await asyncio.wait_for(run.task, 60) == 1

    asyncio.run(run_queue())
    records = {r["id"]: r for r in read_records(tmp_path / "run") or []}
    assert records["short"]["series"]["val_acc"] and records["long"]["status"] == "killed"
    assert records["long"]["series"]["val_acc"]  # what it reported before the kill
    assert len(alpha.commands("read_metrics.sh")) - before == 1
