"""Host entries of a manifest: what each key becomes, and the exact message and key path of each
mistake (pinned because mutation testing found these unchecked)."""

from __future__ import annotations

import pytest

from eq_tui.errors import ManifestError
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import SimulateSpec, SlurmSpec

JOB = "jobs: [{id: a, cmd: x}]\n"


def hosts(text: str):  # type: ignore[no-untyped-def]
    return load_manifest_text(JOB + text, "h.yaml").hosts


def test_every_host_key_is_read() -> None:
    (sim, ssh, slurm) = hosts(
        "gpus: [0, 1]\nmax_parallel: 3\nhosts:\n"
        "  - {name: s, simulate: {gpus: 4, memory_mib: 1000, model: M, linger_s: 0.5}, "
        "gpus: [2, 3], max_parallel: 2, log_dir: /l}\n"
        "  - {name: r, ssh: me@box:2222}\n"
        "  - name: c\n    slurm: {ssh: login1, partition: gpu, account: acc, qos: q, "
        "time: '01:00:00', mem: 8G, cpus_per_task: 4, sbatch_args: [--x, 5]}\n")
    assert (sim.name, sim.gpus, sim.max_parallel, sim.log_dir) == ("s", (2, 3), 2, "/l")
    assert sim.simulate == SimulateSpec(gpus=4, memory_mib=1000, model="M", linger_s=0.5)
    assert (ssh.name, ssh.ssh, ssh.gpus, ssh.max_parallel) == ("r", "me@box:2222", (0, 1), 3)
    assert slurm.slurm == SlurmSpec(ssh="login1", partition="gpu", account="acc", qos="q",
                                    time="01:00:00", mem="8G", cpus_per_task=4,
                                    sbatch_args=("--x", "5"))
    assert (sim.max_parallel_given, ssh.max_parallel_given) == (True, True)
    (shared,) = hosts("hosts: [{name: b, ssh: b, claims_dir: /scratch/claims, "
                      "rules: /opt/lab/rules.yaml}]\n")
    assert (shared.claims_dir, shared.rules) == ("/scratch/claims", "/opt/lab/rules.yaml")
    assert hosts("hosts: [{name: c, slurm: {}}]")[0].slurm == SlurmSpec()
    assert hosts("hosts: [{name: s, simulate: {}}]")[0].simulate == SimulateSpec()


def test_a_single_ssh_host_is_named_after_its_host_part() -> None:
    (only,) = hosts("ssh: me@gpu-box.lab:2222\ngpus: all\n")
    assert (only.name, only.ssh, only.gpus, only.max_parallel) == (
        "gpu-box.lab", "me@gpu-box.lab:2222", None, 8)
    (local,) = hosts("gpus: [1]\n")
    assert (local.name, local.gpus, local.ssh) == ("local", (1,), None)
    assert not only.max_parallel_given and not local.max_parallel_given


def test_max_parallel_is_given_where_the_host_or_the_top_level_sets_it() -> None:
    (mine, default) = hosts("hosts:\n  - {name: a, ssh: a, max_parallel: 16}\n"
                            "  - {name: b, ssh: b}\n")
    assert (mine.max_parallel, mine.max_parallel_given) == (16, True)
    assert (default.max_parallel, default.max_parallel_given) == (8, False)
    (single,) = hosts("ssh: box\nmax_parallel: 4\n")
    assert (single.max_parallel, single.max_parallel_given) == (4, True)


@pytest.mark.parametrize(("text", "key_path", "message"), [
    ("ssh: a\nhosts: [{name: b}]\n", "hosts",
     "give either 'ssh' (one host) or 'hosts' (a list), not both"),
    ("hosts: []\n", "hosts", "the host list is empty"),
    ("hosts: [{name: a}, {name: a}]\n", "hosts[1].name",
     "host name 'a' is used twice (also hosts[0])"),
    ("gpus: some\n", "gpus", "expected a list of GPU indices or 'all', got 'some'"),
    ("gpus: []\n", "gpus", "the GPU list is empty (use 'all' for every GPU)"),
    ("gpus: [1, 1]\n", "gpus", "a GPU is listed twice"),
    ("gpus: [0, -1]\n", "gpus[1]", "must be at least 0"),
    ("ssh: 'a b'\n", "ssh", "'a b' is not an ssh alias or [user@]host[:port]"),
    ("hosts: [{simulate: {}}]\n", "hosts[0]", "every host needs a 'name'"),
    ("hosts: [{name: a, ssh: b, simulate: {}}]\n", "hosts[0].simulate",
     "a host is one of ssh, simulate or slurm, not ssh and simulate"),
    ("hosts: [{name: a, ssh: b, slurm: {}}]\n", "hosts[0].slurm",
     "a host is one of ssh, simulate or slurm, not ssh and slurm (a Slurm login node goes in "
     "slurm.ssh)"),
    ("hosts: [{name: a, simulate: {gpus: 2}, gpus: [2]}]\n", "hosts[0].gpus",
     "GPU 2 does not exist on simulated host 'a' (it has 2: 0..1)"),
    ("gpus: [3]\nhosts: [{name: a, simulate: {gpus: 2}}]\n", "gpus",
     "GPU 3 does not exist on simulated host 'a' (it has 2: 0..1)"),
    ("hosts: [{name: a, max_parallel: 0}]\n", "hosts[0].max_parallel", "must be at least 1"),
    ("hosts: [{name: a, log_dir: [x]}]\n", "hosts[0].log_dir", "expected"),
    ("hosts: [{name: a, ssh: 'x y'}]\n", "hosts[0].ssh", "'x y' is not an ssh alias"),
    ("hosts: [{name: a, simulate: {gpus: 0}}]\n", "hosts[0].simulate.gpus", "must be at least 1"),
    ("hosts: [{name: a, simulate: {memory_mib: 0}}]\n", "hosts[0].simulate.memory_mib",
     "must be at least 1"),
    ("hosts: [{name: a, simulate: {model: [m]}}]\n", "hosts[0].simulate.model", "expected"),
    ("hosts: [{name: a, simulate: {linger_s: -1}}]\n", "hosts[0].simulate.linger_s",
     "must be at least 0"),
    ("hosts: [{name: a, simulate: {gpu: 2}}]\n", "hosts[0].simulate.gpu", "unknown key"),
    ("hosts: [{name: a, slurm: {partiton: g}}]\n", "hosts[0].slurm.partiton", "unknown key"),
    ("hosts: [{name: a, slurm: {ssh: 'x y'}}]\n", "hosts[0].slurm.ssh", "'x y' is not"),
    ("hosts: [{name: a, slurm: {cpus_per_task: 0}}]\n", "hosts[0].slurm.cpus_per_task",
     "must be at least 1"),
    ("hosts: [{name: a, slurm: {sbatch_args: [[x]]}}]\n", "hosts[0].slurm.sbatch_args[0]",
     "expected"),
    ("hosts: [{name: a, slurm: {sbatch_args: x}}]\n", "hosts[0].slurm.sbatch_args", "expected"),
    ("hosts: [{name: a, slurm: {mem: [1]}}]\n", "hosts[0].slurm.mem", "expected"),
    ("hosts: [a]\n", "hosts[0]", "expected a mapping"),
    ("hosts: [{name: a, simulate: [1]}]\n", "hosts[0].simulate", "expected a mapping"),
    ("hosts: [{name: a, slurm: [1]}]\n", "hosts[0].slurm", "expected a mapping"),
    ("hosts: [{name: a, sim: {}}]\n", "hosts[0].sim", "unknown key"),
    ("gpus: {a: 1}\n", "gpus", "expected"),
    ("ssh: [x]\n", "ssh", "expected"),
    ("hosts: [{name: 'a b'}]\n", "hosts[0].name",
     "host name 'a b' may only use letters, digits, '_', '.', '-'"),
    ("hosts: [{name: a, claims_dir: 'claims'}]\n", "hosts[0].claims_dir",
     "'claims' must be an absolute path of letters, digits and _ . + - /"),
    ("hosts: [{name: a, rules: '/etc/my rules.yaml'}]\n", "hosts[0].rules",
     "'/etc/my rules.yaml' must be an absolute path of letters, digits and _ . + - /"),
    ("hosts: [{name: a, claims_dir: 5}]\n", "hosts[0].claims_dir", "expected a string"),
])
def test_host_mistakes_name_their_key_and_say_what_is_wrong(text: str, key_path: str,
                                                           message: str) -> None:
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(JOB + text, "h.yaml")
    assert caught.value.key_path == key_path, str(caught.value)
    if message.startswith(("must", "expected", "unknown")) or \
            message.endswith(" is not"):
        assert message in caught.value.message, str(caught.value)
    elif message.endswith("ssh alias"):
        assert caught.value.message.startswith(message), str(caught.value)
    else:
        assert caught.value.message == message, str(caught.value)
    assert caught.value.line == (3 if text.startswith("ssh: a\nhosts") else 2)


def test_a_model_or_a_slurm_setting_written_as_a_number_is_kept_as_text() -> None:
    (sim, slurm) = hosts("hosts:\n  - {name: s, simulate: {model: 4090}}\n"
                         "  - {name: c, slurm: {mem: 8000, time: 60}}\n")
    assert sim.simulate.model == "4090"
    assert (slurm.slurm.mem, slurm.slurm.time) == ("8000", "60")
