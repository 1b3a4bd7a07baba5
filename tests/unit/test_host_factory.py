"""The host factory: which Host each manifest host becomes, and where its jobs run."""

from __future__ import annotations

from pathlib import Path

import pytest

from eq_tui.hosts.factory import job_cwd, make_hosts
from eq_tui.manifest import load_manifest_text

HOSTS = """\
project: p
hosts:
  - {name: here}
  - {name: fake, simulate: {gpus: 1}}
  - {name: box, ssh: me@box:2222}
  - {name: cluster, slurm: {partition: gpu}}
  - {name: login, slurm: {ssh: login1}}
jobs: [{id: a, cmd: x}]
"""


def test_hosts_on_this_filesystem_run_jobs_beside_the_manifest(tmp_path: Path) -> None:
    manifest = load_manifest_text(HOSTS, str(tmp_path / "sub" / "m.yaml"))
    where = {spec.name: job_cwd(spec, manifest) for spec in manifest.hosts}
    beside = str((tmp_path / "sub").resolve())
    assert where == {"here": beside, "fake": beside, "box": None, "cluster": None,
                     "login": None}


def test_the_manifests_cwd_wins_on_every_host(tmp_path: Path) -> None:
    manifest = load_manifest_text("cwd: /data/exp\n" + HOSTS, str(tmp_path / "m.yaml"))
    assert {job_cwd(spec, manifest) for spec in manifest.hosts} == {"/data/exp"}


@pytest.mark.parametrize("ssh_config", [None, "/etc/eq/ssh_config"])
def test_the_ssh_config_reaches_every_ssh_connection(tmp_path: Path,
                                                     ssh_config: str | None) -> None:
    manifest = load_manifest_text(HOSTS, str(tmp_path / "m.yaml"))
    hosts = make_hosts(manifest, tmp_path / "run", ssh_config=ssh_config)
    for name in ("box", "login"):
        runner = hosts[name].runner  # type: ignore[attr-defined]
        if ssh_config is None:  # then ~/.ssh/config, when there is one
            assert runner.config_path in (None, str(Path.home() / ".ssh" / "config"))
        else:
            assert runner.config_path == ssh_config
