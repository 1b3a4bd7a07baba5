"""Test-only: make `eq-tui` runnable on an sshbed host by its login user.

The login user cannot run the venv's python (a symlink into root's private pyenv), but the
system python3 is the same minor version, so a wrapper on that host's PATH runs
`python3 -m eq_tui` with copies of this checkout's package and of the venv's site-packages on
PYTHONPATH (its compiled wheels are abi3 or built for this minor version). Copies, in the bed's
own directory, because the checkout may sit where the login user cannot reach it (a clone under
a 0700 temporary directory). Never part of the product.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import eq_tui
from tests.support.sshbed import SshBed, SshHost

SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")


def _system_python() -> str:
    wanted = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in SYSTEM_PYTHONS:
        if shutil.which(candidate) is None:
            continue
        found = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % "
                                "sys.version_info[:2])"], capture_output=True, text=True)
        if found.stdout.strip() == wanted:
            return candidate
    raise RuntimeError(f"no system python {wanted} for the sshbed's login user to run eq-tui "
                       f"with (tried {', '.join(SYSTEM_PYTHONS)})")


def _shared_copy(bed_root: Path) -> Path:
    """This checkout's package and the venv's site-packages, copied once per bed."""
    share = bed_root / "eq-tui-share"
    if share.exists():
        return share
    partial = bed_root / "eq-tui-share.partial"
    shutil.rmtree(partial, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(eq_tui.__file__).resolve().parent, partial / "repo" / "eq_tui",
                    ignore=skip)
    for i, source in enumerate(_site_dirs()):
        shutil.copytree(source, partial / f"site{i}", ignore=skip, symlinks=True)
    partial.rename(share)
    return share


def _site_dirs() -> list[str]:
    return list(dict.fromkeys(sysconfig.get_paths()[part] for part in ("purelib", "platlib")))


def install_eq_tui(host: SshHost) -> Path:
    """Puts an `eq-tui` wrapper first on `host`'s PATH; returns its path."""
    share = _shared_copy(host.dir.parent)
    paths = [str(share / "repo"), *(str(share / f"site{i}") for i in range(len(_site_dirs())))]
    wrapper = host.bin / "eq-tui"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"PYTHONPATH={shlex.quote(':'.join(paths))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
        "export PYTHONPATH\n"
        f"exec {shlex.quote(_system_python())} -m eq_tui \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def check_eq_tui_runs_there(bed: SshBed, name: str) -> None:
    """Fails with what the login user saw when the wrapper cannot run eq-tui there."""
    result = subprocess.run(["ssh", "-F", str(bed.ssh_config), "-o", "BatchMode=yes", name,
                             "eq-tui --version && whoami"], capture_output=True, text=True,
                            timeout=60)
    if result.returncode != 0 or "eq-tui" not in result.stdout:
        raise RuntimeError(f"eq-tui does not run on sshbed host {name}: exit "
                           f"{result.returncode}\n{result.stdout}{result.stderr}")
