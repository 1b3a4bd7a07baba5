"""Real OpenSSH hosts on loopback with simulated GPUs, for tests, the demo bed and benchmarks.

Each host is its own `sshd -D` on 127.0.0.1 with its own host key, a `SetEnv` that puts the
sim's nvidia-smi first on PATH and gives it its own GPU state, screen and tmux dirs, and a
ForceCommand that records every command it runs (so tests can count probes server-side).
Logins are as the dedicated non-root user `eqtest`; a bed made with more `users` lets each of
them log in to every host (their own screen and tmux dirs, one shared GPU state and claims
directory: several people on one box). Each host's sshd logs (LogLevel VERBOSE) to its
`sshd.log`, each start of it stamped there with its time (SSHD_STARTED). Everything started is
stopped by pid.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from eq_tui.sim.state import init_sim_state, sim_bin_dir

USER = "eqtest"
OTHER_USER = "eqtest2"  # a second person on the same hosts (SshBed.create(users=...))
SSHD = "/usr/sbin/sshd"
# sshd's own lines carry no time: the bed stamps each start of a host's sshd into its log, so
# a connection that sshd accepted and never logged closed is placed in the listener's life
# that a cut or a reboot ended (tests/chaos/traces.py)
SSHD_STARTED = "eq-bed: sshd started at "
# Logs the first 60 characters of each command's first line, with no process of its own (every
# command of every host passes here: on a 16-host bed that adds up).
COUNTING_SHELL = """#!/bin/sh
nl='
'
printf '%.60s\\n' "${SSH_ORIGINAL_COMMAND%%"$nl"*}" >> "$EQ_BED_HOST_DIR/commands.log"
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
"""


def ensure_user(name: str = USER) -> pwd.struct_passwd:
    with open("/tmp/eq-tui-sshbed-user.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True)
            # with UsePAM no, an account without a password hash counts as locked
            subprocess.run(["usermod", "-p", "*", name], check=True)
            return pwd.getpwnam(name)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                found.append(int(entry.name))
    return found


def _descendants(pid: int) -> list[int]:
    found = []
    for child in _children(pid):
        found.append(child)
        found.extend(_descendants(child))
    return found


def _environ_has(pid: int, marker: bytes) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _kill(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


@dataclass
class SshHost:
    name: str
    port: int
    dir: Path
    gpus: int
    memory_mib: int
    model: str
    process: subprocess.Popen[bytes] | None = None

    @property
    def sim_state(self) -> Path:
        return self.dir / "sim"

    @property
    def bin(self) -> Path:
        """A directory first on this host's PATH (programs only this host has)."""
        return self.dir / "bin"

    @property
    def commands_log(self) -> Path:
        return self.dir / "commands.log"

    @property
    def claims(self) -> Path:
        """The host's GPU claims directory (sticky and world-writable, as /tmp is)."""
        return self.dir / "claims"

    @property
    def rules(self) -> Path:
        """The host's lab rules file (none until a test writes it)."""
        return self.dir / "rules.yaml"

    def socket_dir(self, kind: str, user: str = USER) -> Path:
        """A user's screen or tmux socket directory on this host."""
        return self.dir / (kind if user == USER else f"{kind}-{user}")

    def commands(self, containing: str = "") -> list[str]:
        try:
            lines = self.commands_log.read_text().splitlines()
        except OSError:
            return []
        return [line for line in lines if containing in line]


@dataclass
class SshBed:
    root: Path
    hosts: dict[str, SshHost] = field(default_factory=dict)
    users: tuple[str, ...] = (USER,)

    def alias(self, host: str, user: str = USER) -> str:
        """The ssh config alias that logs in to `host` as `user`."""
        return host if user == USER else f"{host}-{user}"

    @property
    def ssh_config(self) -> Path:
        return self.root / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def work(self) -> Path:
        """A directory the login user owns, for manifests' `cwd`."""
        return self.root / "work"

    @property
    def sim_bin(self) -> Path:
        """The sim's programs, copied here: the checkout may sit where the login user cannot
        reach it (a clone under a 0700 temporary directory)."""
        return self.root / "sim-bin"

    # ---- building ---------------------------------------------------------------------------

    @classmethod
    def create(cls, specs: list[tuple[str, int, int, str]],
               users: tuple[str, ...] = (USER,)) -> SshBed:
        """specs: (name, gpus, memory_mib, model) per host; users: who may log in (the first
        owns the bed's work dir)."""
        accounts = {name: ensure_user(name) for name in users}
        user = accounts[users[0]]
        shared = len(users) > 1
        root = Path(f"/tmp/eqbed-{secrets.token_hex(4)}")
        root.mkdir(mode=0o755)
        root.chmod(0o755)
        bed = cls(root, users=users)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        str(root / "client_key")], check=True)
        (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
        (root / "authorized_keys").chmod(0o644)
        (root / "count.sh").write_text(COUNTING_SHELL)
        (root / "count.sh").chmod(0o755)
        bed.work.mkdir()
        os.chown(bed.work, user.pw_uid, user.pw_gid)
        shutil.copytree(sim_bin_dir(), bed.sim_bin, ignore=shutil.ignore_patterns("__pycache__"))
        Path("/run/sshd").mkdir(exist_ok=True)
        for name, gpus, memory, model in specs:
            host = SshHost(name, free_port(), root / name, gpus, memory, model)
            host.dir.mkdir(mode=0o755)
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                            str(host.dir / "host_key")], check=True)
            init_sim_state(host.sim_state, host=name, gpus=gpus, memory_mib=memory, model=model)
            for login, account in accounts.items():
                for sub in ("screen", "tmux"):
                    host.socket_dir(sub, login).mkdir(mode=0o700)
                    os.chown(host.socket_dir(sub, login), account.pw_uid, account.pw_gid)
            host.bin.mkdir(mode=0o755)  # first on the host's PATH: see remote_eq.py
            host.claims.mkdir()
            host.claims.chmod(0o1777)
            (host.dir / "commands.log").touch()
            for path in (host.sim_state, host.dir / "commands.log", *host.sim_state.rglob("*")):
                os.chown(path, user.pw_uid, user.pw_gid)
            if shared:  # every user's jobs register on the same simulated GPUs
                (host.sim_state / "runs.jsonl").touch()
                (host.sim_state / ".lock").touch()
                for path in (host.sim_state, host.sim_state / "procs"):
                    path.chmod(0o777)
                for path in (host.sim_state / "runs.jsonl", host.sim_state / ".lock",
                             host.dir / "commands.log"):
                    path.chmod(0o666)
            bed.hosts[name] = host
            bed._write_sshd_config(host)
            bed.start(name)
        bed.write_client_files()
        return bed

    def _env(self, host: SshHost, user: str) -> str:
        return " ".join([
            f"PATH={host.bin}:{self.sim_bin}:/usr/local/bin:/usr/bin:/bin",
            f"EQ_SIM_STATE={host.sim_state}", f"SCREENDIR={host.socket_dir('screen', user)}",
            f"TMUX_TMPDIR={host.socket_dir('tmux', user)}", f"EQ_FAKE_HOST={host.name}",
            f"EQ_BED={self.root}", f"EQ_BED_HOST_DIR={host.dir}",
            f"EQ_TUI_CLAIMS={host.claims}", f"EQ_TUI_RULES={host.rules}",
        ])

    def _write_sshd_config(self, host: SshHost) -> None:
        # sshd keeps the first SetEnv it reads: with several users, each gets its own in a Match
        if len(self.users) == 1:
            env = f"SetEnv {self._env(host, self.users[0])}\n"
        else:
            env = "".join(f"Match User {user}\n  SetEnv {self._env(host, user)}\n"
                          for user in self.users)
        (host.dir / "sshd_config").write_text(f"""\
Port {host.port}
ListenAddress 127.0.0.1
HostKey {host.dir / 'host_key'}
PidFile {host.dir / 'sshd.pid'}
AuthorizedKeysFile {self.root / 'authorized_keys'}
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AllowUsers {" ".join(self.users)}
MaxSessions 100
MaxStartups 100:30:200
LogLevel VERBOSE
ForceCommand {self.root / 'count.sh'}
{env}""")

    def write_client_files(self) -> None:
        known, config = [], []
        for host in self.hosts.values():
            key = (host.dir / "host_key.pub").read_text().split()
            known.append(f"[127.0.0.1]:{host.port} {key[0]} {key[1]}")
            for user in self.users:
                config.append(f"Host {self.alias(host.name, user)}\n  HostName 127.0.0.1\n"
                              f"  Port {host.port}\n"
                              f"  User {user}\n  IdentityFile {self.root / 'client_key'}\n"
                              f"  UserKnownHostsFile {self.known_hosts}\n"
                              "  StrictHostKeyChecking yes\n")
        self.known_hosts.write_text("\n".join(known) + "\n")
        self.ssh_config.write_text("\n".join(config))

    # ---- faults, by pid ----------------------------------------------------------------------

    def start(self, name: str) -> None:
        host = self.hosts[name]
        log = open(host.dir / "sshd.log", "ab")  # noqa: SIM115 - sshd writes it for its life
        log.write(f"{SSHD_STARTED}{time.time():.6f}\n".encode())
        log.flush()
        host.process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(host.dir / "sshd_config")],
                                        stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", host.port), timeout=1) as sock:
                if sock.recv(4).startswith(b"SSH"):
                    return
            if host.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sshd for {name} did not start: "
                                   f"{(host.dir / 'sshd.log').read_text()[-500:]}")
            time.sleep(0.02)

    def stop_listener(self, name: str) -> None:
        """Stop accepting connections; connections already open stay up (as with real sshd)."""
        host = self.hosts[name]
        if host.process is not None:
            host.process.kill()
            host.process.wait()

    def cut(self, name: str) -> None:
        """Drop every open connection to the host (its per-connection sshd processes)."""
        host = self.hosts[name]
        if host.process is None:
            return
        for child in _descendants(host.process.pid):
            _kill(child)

    def take_down(self, name: str) -> None:
        """The host is gone from the network: connections cut, nothing accepted."""
        host = self.hosts[name]
        if host.process is not None:
            children = _descendants(host.process.pid)
            self.stop_listener(name)
            for child in children:
                _kill(child)

    def reboot(self, name: str) -> tuple[float, list[list[str]]]:
        """Like a reboot: connections cut and every process and session on the host gone.
        Returns when everything on it had been killed (before it comes back up), and the
        command line of each process it killed."""
        self.take_down(name)
        killed = self._kill_marked(f"EQ_BED_HOST_DIR={self.hosts[name].dir}".encode())
        killed_at = time.time()
        for user in self.users:
            for sub in ("screen", "tmux"):
                for entry in self.hosts[name].socket_dir(sub, user).iterdir():
                    with contextlib.suppress(OSError):
                        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        self.start(name)
        return killed_at, killed

    def rotate_host_key(self, name: str) -> None:
        """A new host key (a reinstalled box, or a man in the middle); known_hosts keeps the old."""
        host = self.hosts[name]
        self.take_down(name)
        for suffix in ("", ".pub"):
            (host.dir / f"host_key{suffix}").unlink()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        str(host.dir / "host_key")], check=True)
        self.start(name)

    def _kill_marked(self, marker: bytes) -> list[list[str]]:
        """SIGKILL each process of the bed's users with `marker` in its environment; returns
        the command line of each one the kill reached."""
        uids = {pwd.getpwnam(user).pw_uid for user in self.users}
        killed = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if entry.stat().st_uid in uids and _environ_has(int(entry.name), marker):
                        argv = (entry / "cmdline").read_bytes().decode(errors="replace")
                        os.kill(int(entry.name), signal.SIGKILL)
                        killed.append(argv.split("\0"))
        return killed

    def close(self) -> None:
        for name in list(self.hosts):
            self.take_down(name)
        self._kill_marked(f"EQ_BED={self.root}".encode())
        shutil.rmtree(self.root, ignore_errors=True)
