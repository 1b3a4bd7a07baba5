"""Fixtures every test folder shares (unit/, integration/, tui/, chaos/).

`bed`: real sshd hosts on loopback with simulated GPUs, one bed per test module. The module
names its hosts in `BED_HOSTS` ([(name, GPUs, MiB each, GPU name)]) and, in `BED_WITH_EQ_TUI`,
the hosts that need eq-tui installed (to run an engine there). `bed_work`: a folder of the
test's own on the bed's hosts, owned by the login user."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.direct_python import put_interpreters_first
from tests.support.remote_eq import check_eq_tui_runs_there, install_eq_tui
from tests.support.sshbed import USER, SshBed

_DIRECT_PYTHON = pytest.StashKey["Path | None"]()


def pytest_configure(config: pytest.Config) -> None:
    # before the xdist workers start, so they and everything they run inherit the PATH
    config.stash[_DIRECT_PYTHON] = put_interpreters_first()


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_DIRECT_PYTHON, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def bed(request: pytest.FixtureRequest) -> Iterator[SshBed]:
    hosts = getattr(request.module, "BED_HOSTS", None)
    if hosts is None:
        raise RuntimeError(f"{request.module.__name__} uses `bed` but names no BED_HOSTS")
    ssh_bed = SshBed.create(list(hosts))
    try:
        for name in getattr(request.module, "BED_WITH_EQ_TUI", ()):
            install_eq_tui(ssh_bed.hosts[name])
            check_eq_tui_runs_there(ssh_bed, name)
        yield ssh_bed
    finally:
        ssh_bed.close()


@pytest.fixture
def bed_work(bed: SshBed, tmp_path: Path) -> Path:
    work = bed.work / tmp_path.name
    work.mkdir()
    shutil.chown(work, USER, USER)
    return work
