"""Build the Host objects a manifest names: local, simulated, ssh (slurm: see its own module)."""

from __future__ import annotations

import os
from pathlib import Path

from eq_tui.errors import UsageError
from eq_tui.hosts.base import Host
from eq_tui.manifest.model import HostSpec, Manifest


def sim_state_dir(run_dir: Path, host: str) -> Path:
    return Path(run_dir).resolve() / "sim" / host


def make_host(spec: HostSpec, run_dir: Path) -> Host:
    logs = str(Path(run_dir).resolve() / "logs")
    if spec.kind == "sim":
        from eq_tui.hosts.local import make_sim_host
        from eq_tui.sim.state import init_sim_state

        assert spec.simulate is not None
        state = sim_state_dir(run_dir, spec.name)
        init_sim_state(state, host=spec.name, gpus=spec.simulate.gpus,
                       memory_mib=spec.simulate.memory_mib, model=spec.simulate.model,
                       linger_s=spec.simulate.linger_s, keep_faults=True)
        return make_sim_host(spec.name, str(state), spec.log_dir or logs)
    if spec.kind == "local":
        from eq_tui.hosts.local import make_local_host

        return make_local_host(spec.name, spec.log_dir or logs)
    if spec.kind == "ssh":
        from eq_tui.hosts.shell_host import ShellHost
        from eq_tui.hosts.ssh import SshRunner

        assert spec.ssh is not None
        runner = SshRunner(spec.name, spec.ssh, config_path=os.environ.get("EQ_TUI_SSH_CONFIG"))
        return ShellHost(spec.name, runner, log_dir=spec.log_dir)
    if spec.kind == "slurm":
        from eq_tui.hosts.slurm import make_slurm_host

        assert spec.slurm is not None
        return make_slurm_host(spec, logs)
    raise UsageError(f"host {spec.name}: unknown host kind")


def make_hosts(manifest: Manifest, run_dir: Path) -> dict[str, Host]:
    return {spec.name: make_host(spec, run_dir) for spec in manifest.hosts}
