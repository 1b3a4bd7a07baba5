"""The lab's rules rechecked at launch (_rules_launch.sh), through the real launch.sh on this
machine: what counts as the rules file the engine saw, what counts as another user waiting,
and which GPUs count as the user's under max_gpus_per_user. Real screen sessions, simulated
GPUs; the other users' engines are their files in the claims directory, as they write them."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from eq_tui.hosts.base import LaunchRequest
from eq_tui.hosts.claim_types import ClaimTicket
from eq_tui.hosts.claims import ClaimRefused
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.shell_host import ShellHost
from eq_tui.sim.state import init_sim_state, sim_bin_dir

pytestmark = pytest.mark.integration
USER = os.environ.get("USER") or os.environ.get("LOGNAME") or "root"


@dataclass
class Bed:
    tmp: Path
    env: dict[str, str]
    claims: Path
    started: list[tuple[str, str]] = field(default_factory=list)

    def host(self, rules: Path) -> ShellHost:
        return ShellHost("r", LocalRunner(self.env), session_prefix="eqr_", rules=str(rules))

    async def launch(self, job: str, gpu: int, *, rules: Path, checksum: str = "?",
                     most: int | None = None, mib: int | None = None) -> None:
        request = LaunchRequest(
            job_id=job, attempt=1, session=f"eqr_{job}_a1",
            attempt_dir=str(self.tmp / "logs" / job / "a1"), cwd=str(self.tmp),
            cmd="sleep 30", gpus=(gpu,), env={"CUDA_VISIBLE_DEVICES": str(gpu)}, conda=None,
            conda_hook=None, launcher="screen",
            claim=ClaimTicket("p", "t1", mib, (), rules_sum=checksum, max_gpus=most))
        self.started.append((request.session, request.attempt_dir))
        await self.host(rules).launch(request)

    def want(self, name: str, line: str, *, age_s: float = 0.0) -> Path:
        """A want file another engine's probe wrote `age_s` seconds ago."""
        path = self.claims / name
        path.write_text(line)
        when = time.time() - age_s
        os.utime(path, (when, when))
        return path


@pytest.fixture
async def bed() -> AsyncIterator[Bed]:
    tmp = Path(tempfile.mkdtemp(prefix="eqre-"))  # short: screen's socket path stays short
    (tmp / "screen").mkdir(mode=0o700)
    state = init_sim_state(tmp / "sim", host="r", gpus=3, memory_mib=8000)
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "STY")}
    env.update(PATH=f"{sim_bin_dir()}{os.pathsep}{env['PATH']}", EQ_SIM_STATE=str(state),
               SCREENDIR=str(tmp / "screen"), EQ_TUI_CLAIMS=str(tmp / "claims"), USER=USER)
    bed = Bed(tmp, env, tmp / "claims")
    bed.claims.mkdir(mode=0o1777)
    bed.claims.chmod(0o1777)
    yield bed
    for session, directory in bed.started:
        await bed.host(tmp / "none").kill(session, directory, "screen")
    subprocess.run(["screen", "-wipe"], env=env, capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


async def test_no_rules_file_then_and_now_is_the_same_rules(bed: Bed) -> None:
    """'-' (the probe found no rules file): a launch goes while there still is none, or while
    the path is no file at all (a directory)."""
    await bed.launch("a", 0, rules=bed.tmp / "missing.yaml", checksum="-")
    (bed.tmp / "rules.d").mkdir()
    await bed.launch("b", 1, rules=bed.tmp / "rules.d", checksum="-")


@pytest.mark.parametrize(("name", "line", "age_s"), [
    ("w.someone.q.beef01", "eqwant0 someone q beef01 1 all 1 - 500\n", 0),  # not a want
    ("w.someone.q.beef01", "eqwant1\n", 0),  # no user named
    # ours (another engine of ours, whose jobs need three GPUs: no fair turn for it either)
    (f"w.{USER}.other.cafe02", f"eqwant1 {USER} other cafe02 1 all 3 - 500\n", 0),
    ("w.someone.q.beef01", "eqwant1 someone q beef01 1 all 1 - 500\n", 60),  # stale: > 3 + 10
])
async def test_only_another_users_fresh_want_makes_the_limit_apply(
        bed: Bed, name: str, line: str, age_s: float) -> None:
    rules = bed.tmp / "rules.yaml"
    rules.write_text("max_gpus_per_user: 1\n")
    await bed.launch("a", 0, rules=rules, most=1)
    bed.want(name, line, age_s=age_s)
    await bed.launch("b", 1, rules=rules, most=1)  # two GPUs: no one else waits


async def test_a_want_naming_no_user_hides_no_other_users_want_after_it(bed: Bed) -> None:
    """The want files are read in order: one that names no user (first, by its name) is
    skipped, and another user's fresh want after it still makes the limit apply."""
    rules = bed.tmp / "rules.yaml"
    rules.write_text("max_gpus_per_user: 1\n")
    await bed.launch("a", 0, rules=rules, most=1)
    bed.want("w.aaa.q.beef00", "eqwant1\n")
    bed.want("w.someone.q.beef01", "eqwant1 someone q beef01 1 all 1 - 500\n")
    with pytest.raises(ClaimRefused, match=r"per user while others wait \(someone\)"):
        await bed.launch("b", 1, rules=rules, most=1)


@pytest.mark.parametrize(("age_s", "applies"), [(13, True), (14, False)])
async def test_a_want_is_fresh_for_three_of_its_polls_and_ten_seconds_to_the_second(
        bed: Bed, age_s: int, applies: bool) -> None:
    """A want written every second (its poll) is another user waiting while it is at most
    3 x 1 + 10 = 13 s old, by the host's clock: fixed here (a `date` before the real one on
    the PATH), so the age is exact."""
    now = int(time.time())
    clock = bed.tmp / "clock"
    clock.mkdir()
    real = shutil.which("date")
    (clock / "date").write_text(
        f'#!/bin/sh\nif [ "$*" = "+%s" ]; then echo {now}; else exec {real} "$@"; fi\n')
    (clock / "date").chmod(0o755)
    bed.env["PATH"] = f"{clock}{os.pathsep}{bed.env['PATH']}"
    rules = bed.tmp / "rules.yaml"
    rules.write_text("max_gpus_per_user: 1\n")
    await bed.launch("a", 0, rules=rules, most=1)
    want = bed.want("w.someone.q.beef01", "eqwant1 someone q beef01 1 all 1 - 500\n")
    os.utime(want, (now - age_s, now - age_s))
    if applies:
        with pytest.raises(ClaimRefused, match=r"per user while others wait \(someone\)"):
            await bed.launch("b", 1, rules=rules, most=1)
    else:
        await bed.launch("b", 1, rules=rules, most=1)


async def test_the_limit_counts_the_users_gpus_and_lets_them_share_the_ones_they_hold(
        bed: Bed) -> None:
    """While another user waits: up to max_gpus_per_user GPUs (exactly that many is allowed),
    another user's claims are not ours, and a GPU we hold already adds nothing (a job that
    shares it goes even where we hold more than the limit since the rules changed)."""
    rules = bed.tmp / "rules.yaml"
    rules.write_text("max_gpus_per_user: 2\n")
    alive = subprocess.Popen(["sleep", "60"])
    try:
        bed.want("w.someone.q.beef01", "eqwant1 someone q beef01 1 all 1 - 500\n")
        (bed.claims / "c.2.someone.q.beef01.j.a1").write_text(
            f"eqclaim1 2 someone q beef01 j 1 {alive.pid} - - eq_q_j_a1\n")
        await bed.launch("a", 0, rules=rules, most=2, mib=1000)
        await bed.launch("b", 1, rules=rules, most=2, mib=1000)  # two: the limit, not over it
        with pytest.raises(ClaimRefused, match=rf"allow 1 GPU\(s\) per user while others wait "
                                               rf"\(someone\); {USER} would hold 3"):
            await bed.launch("c", 2, rules=rules, most=1, mib=1000)
        await bed.launch("d", 0, rules=rules, most=1, mib=1000)  # GPU 0 is ours already
    finally:
        alive.kill()
        alive.wait()
