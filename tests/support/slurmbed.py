"""A real single-node Slurm cluster (munged, slurmctld, slurmd) with 4 fake GPUs, for tests.

Slurm and munge come from Debian's packages (`.ci/setup` installs them); nothing here installs
anything. Every path the daemons use lives in one directory under /tmp, so the bed never touches
/etc/slurm or /run/munge. pytest-xdist workers share one cluster: the first to arrive starts it
under a file lock, every user holds a shared lock on a second file while it runs, and the starter
stops the daemons (by pid) only once it can take that lock exclusively.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

SETUP_LOCK = Path("/tmp/eq-tui-slurm.lock")
USERS_LOCK = Path("/tmp/eq-tui-slurm.users")
CLUSTER_FILE = Path("/tmp/eq-tui-slurm.json")
GPUS = 4
CPUS = 16
REAL_MEMORY_MIB = 16000
DEFAULT_JOB_MEMORY_MIB = 1000
DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")


def slurm_available() -> bool:
    return all(os.access(path, os.X_OK) for path in DAEMONS) and shutil.which("sbatch") is not None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _stop(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


@dataclass
class SlurmBed:
    root: Path
    node: str
    pids: dict[str, int]
    owner: bool = False

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def jobcomp(self) -> Path:
        return self.root / "jobcomp.log"

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm client commands (and so for eq-tui's LocalRunner)."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *args: str, check: bool = True) -> str:
        result = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=30,
                                check=False)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {result.returncode}: {result.stderr}")
        return result.stdout

    def completed(self, name_prefix: str = "") -> list[dict[str, str]]:
        """Jobs in the job-completion file (one line per finished job), as key=value dicts."""
        records = []
        with contextlib.suppress(OSError):
            for line in self.jobcomp.read_text().splitlines():
                record = dict(part.split("=", 1) for part in line.split() if "=" in part)
                if record.get("Name", "").startswith(name_prefix):
                    records.append(record)
        return records

    # ---- starting -----------------------------------------------------------------------------

    @classmethod
    def start(cls) -> SlurmBed:
        node = socket.gethostname().split(".")[0]
        root = Path(f"/tmp/eq-slurm-{secrets.token_hex(4)}")
        root.mkdir(mode=0o755)
        bed = cls(root, node, {}, owner=True)
        try:
            bed._write_files()
            bed._start_munge()
            bed._start_daemons()
        except BaseException:
            bed.stop()
            raise
        return bed

    def _write_files(self) -> None:
        for sub in ("state", "spool", "gpus"):
            (self.root / sub).mkdir(mode=0o755)
        for i in range(GPUS):
            # gres.conf wants character devices; /dev/null's numbers make harmless ones
            os.mknod(self.root / "gpus" / f"nvidia{i}", 0o666 | 0o020000, os.makedev(1, 3))
        r = self.root
        (r / "gres.conf").write_text(
            f"AutoDetect=off\nName=gpu File={r}/gpus/nvidia[0-{GPUS - 1}]\n")
        (r / "slurm.conf").write_text(f"""\
ClusterName=eqtest
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={r}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/slurmctld.log
SlurmdLogFile={r}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerNode={DEFAULT_JOB_MEMORY_MIB}
GresTypes=gpu
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={self.jobcomp}
MinJobAge=600
KillWait=2
MailProg=/bin/true
ReturnToService=2
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=1
SlurmdParameters=config_overrides
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={CPUS} RealMemory={REAL_MEMORY_MIB} \
Gres=gpu:{GPUS} State=UNKNOWN
PartitionName=gpu Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
""")

    def _spawn(self, name: str, args: list[str], *, user: str | None = None) -> None:
        log = open(self.root / f"{name}.out", "ab")  # noqa: SIM115 - the daemon owns it
        kwargs: dict[str, object] = {}
        if user is not None:
            entry = pwd.getpwnam(user)
            kwargs = {"user": entry.pw_uid, "group": entry.pw_gid}
        process = subprocess.Popen(args, stdout=log, stderr=log, env=self.env,
                                   start_new_session=True, **kwargs)  # type: ignore[call-overload]
        log.close()
        self.pids[name] = process.pid

    def _start_munge(self) -> None:
        munge = pwd.getpwnam("munge")
        mdir = self.root / "munge"
        mdir.mkdir(mode=0o711)
        mdir.chmod(0o711)  # munged wants its socket dir searchable by all, writable by it only
        os.chown(mdir, munge.pw_uid, munge.pw_gid)
        key = mdir / "munge.key"
        subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/mungekey", "-c", "-k",
                        str(key)], check=True, capture_output=True)
        self._spawn("munged", ["/usr/sbin/munged", "-F", f"--socket={mdir}/munge.socket",
                               f"--key-file={key}", f"--pid-file={mdir}/munged.pid",
                               f"--log-file={mdir}/munged.log", f"--seed-file={mdir}/seed"],
                    user="munge")
        self._wait("munged", lambda: (mdir / "munge.socket").exists())

    def _start_daemons(self) -> None:
        self._spawn("slurmctld", ["/usr/sbin/slurmctld", "-D", "-i", "-c", "-f", str(self.conf)])
        self._wait("slurmctld", lambda: "UP" in self.run("scontrol", "ping", check=False))
        self._spawn("slurmd", ["/usr/sbin/slurmd", "-D", "-f", str(self.conf)])
        self._wait("slurmd", lambda: self.run("sinfo", "-h", "-N", "-o", "%t",
                                              check=False).strip() == "idle")

    def _wait(self, name: str, ready: object, timeout: float = 30.0) -> None:
        assert callable(ready)
        deadline = time.monotonic() + timeout
        while not ready():
            pid = self.pids.get(name)
            if pid is not None and not _alive(pid):
                raise RuntimeError(f"{name} exited: {self._log_tail(name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready after {timeout} s: {self._log_tail(name)}")
            time.sleep(0.05)

    def _log_tail(self, name: str) -> str:
        texts = []
        for path in (self.root / f"{name}.out", self.root / f"{name}.log",
                     self.root / "munge" / "munged.log"):
            with contextlib.suppress(OSError):
                texts.append(path.read_text()[-1500:])
        return "\n".join(texts)

    def healthy(self) -> bool:
        return all(_alive(pid) for pid in self.pids.values()) and "UP" in self.run(
            "scontrol", "ping", check=False)

    def stop(self) -> None:
        """Stop what this bed started (by pid), the node's jobs first."""
        if "slurmctld" in self.pids and _alive(self.pids["slurmctld"]):
            self.run("scancel", "--full", "-u", "root", check=False)
        for name in ("slurmd", "slurmctld", "munged"):
            pid = self.pids.pop(name, None)
            if pid is not None:
                _stop(pid)
        shutil.rmtree(self.root, ignore_errors=True)

    def to_json(self) -> dict[str, object]:
        return {"root": str(self.root), "node": self.node, "pids": self.pids}


class SharedSlurm:
    """One cluster for every pytest worker on this machine (see the module docstring)."""

    def __init__(self) -> None:
        self.bed: SlurmBed | None = None
        self._users: IO[str] | None = None

    def __enter__(self) -> SlurmBed:
        with open(SETUP_LOCK, "a") as setup:
            fcntl.flock(setup, fcntl.LOCK_EX)
            bed = self._existing()
            if bed is None:
                bed = SlurmBed.start()
                CLUSTER_FILE.write_text(json.dumps(bed.to_json()))
            self._users = open(USERS_LOCK, "a")
            fcntl.flock(self._users, fcntl.LOCK_SH)
        self.bed = bed
        return bed

    @staticmethod
    def _existing() -> SlurmBed | None:
        try:
            raw = json.loads(CLUSTER_FILE.read_text())
        except (OSError, ValueError):
            return None
        bed = SlurmBed(Path(raw["root"]), str(raw["node"]),
                       {k: int(v) for k, v in raw["pids"].items()})
        if bed.root.is_dir() and bed.healthy():
            return bed
        CLUSTER_FILE.unlink(missing_ok=True)
        return None

    def __exit__(self, *_exc: object) -> None:
        assert self._users is not None and self.bed is not None
        self._users.close()
        if not self.bed.owner:
            return
        with open(SETUP_LOCK, "a") as setup:
            fcntl.flock(setup, fcntl.LOCK_EX)
            with open(USERS_LOCK, "a") as users:
                fcntl.flock(users, fcntl.LOCK_EX)  # every other worker is done with it
                CLUSTER_FILE.unlink(missing_ok=True)
                self.bed.stop()


def main() -> None:
    """Start the single-node cluster in the foreground (for the sample manifest); Ctrl-C
    stops it."""
    if not slurm_available():
        raise SystemExit("slurmctld/slurmd/munge are not installed: run .ci/setup")
    bed = SlurmBed.start()
    # blocked only now: the daemons must not inherit a mask that ignores SIGTERM
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    print(f"Slurm is up ({GPUS} fake GPUs, partition gpu). In another shell:\n"
          f"  export SLURM_CONF={bed.conf}", flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        bed.stop()


if __name__ == "__main__":
    main()
