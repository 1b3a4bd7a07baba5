"""Build the Host objects a manifest names: local, simulated, ssh (slurm: see its own module);
and say where each kind of host runs a job."""

from __future__ import annotations

from pathlib import Path

from eq_tui.errors import UsageError
from eq_tui.hosts.base import Host
from eq_tui.manifest.model import HostSpec, Manifest


def sim_state_dir(run_dir: Path, host: str) -> Path:
    return Path(run_dir).resolve() / "sim" / host


def job_cwd(spec: HostSpec, manifest: Manifest) -> str | None:
    """The directory jobs on this host run in, and that output checks and preconditions are
    relative to: the manifest's `cwd`; else, on a host that shares this machine's filesystem
    (local, simulated), the manifest's own directory; else None, the login directory."""
    if manifest.cwd:
        return manifest.cwd
    if spec.kind in ("local", "sim"):
        return str(Path(manifest.source).resolve().parent)
    return None


def make_host(spec: HostSpec, run_dir: Path, *, ssh_config: str | None = None) -> Host:
    """`ssh_config`: the ssh config file (`--ssh-config`) for ssh and Slurm login hosts;
    None reads ~/.ssh/config."""
    logs = str(Path(run_dir).resolve() / "logs")
    if spec.kind == "sim":
        from eq_tui.hosts.local import make_sim_host
        from eq_tui.sim.state import init_sim_state

        assert spec.simulate is not None
        state = sim_state_dir(run_dir, spec.name)
        init_sim_state(state, host=spec.name, gpus=spec.simulate.gpus,
                       memory_mib=spec.simulate.memory_mib, model=spec.simulate.model,
                       linger_s=spec.simulate.linger_s, keep_faults=True)
        return make_sim_host(spec.name, str(state), spec.log_dir or logs,
                             claims_dir=spec.claims_dir, rules=spec.rules)
    if spec.kind == "local":
        from eq_tui.hosts.local import make_local_host

        return make_local_host(spec.name, spec.log_dir or logs, claims_dir=spec.claims_dir,
                               rules=spec.rules)
    if spec.kind == "ssh":
        from eq_tui.hosts.shell_host import ShellHost
        from eq_tui.hosts.ssh import SshRunner

        assert spec.ssh is not None
        runner = SshRunner(spec.name, spec.ssh, config_path=ssh_config)
        return ShellHost(spec.name, runner, log_dir=spec.log_dir, claims_dir=spec.claims_dir,
                         rules=spec.rules)
    if spec.kind == "slurm":
        from eq_tui.hosts.slurm import make_slurm_host

        assert spec.slurm is not None
        return make_slurm_host(spec, logs, ssh_config=ssh_config)
    raise UsageError(f"host {spec.name}: unknown host kind")


def make_hosts(manifest: Manifest, run_dir: Path, *,
               ssh_config: str | None = None) -> dict[str, Host]:
    return {spec.name: make_host(spec, run_dir, ssh_config=ssh_config)
            for spec in manifest.hosts}
