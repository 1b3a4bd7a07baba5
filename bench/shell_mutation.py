"""Mutation score of the host scripts (eq_tui/hosts/scripts/*.sh), script by script, with the
integration tests that run them (real screen/tmux sessions, simulated GPUs).

    .venv/bin/python bench/mutation.py eq_tui/hosts/scripts/launch.sh    # score and record
    .venv/bin/python bench/mutation.py SCRIPT --rerun-survivors  # survivors vs tests added since
    .venv/bin/python bench/shell_mutation.py SCRIPT --list        # its mutants, not run
    .venv/bin/python bench/shell_mutation.py SCRIPT --only L42:-lt/-le   # a look, not recorded

The mutants are bench/shell_mutants.py's (the operators a shell bug takes). Each script is
scored in its own copy of the checkout: the tests run there, so the host code they import
(shell_protocol.script, which inlines `# eq-tui include:` pieces) reads the mutated file. The
tests first run once unmutated (they must pass; their times order them, fastest first), then
once with `exit 97` as the script's first line (they must fail: proof that they run the copy's
script); then per mutant with `-x`: killed when a test fails or runs out of time.

bench/mutation.py records the score in bench/results/mutation_scores.json beside the Python
modules' (key: the script's path; the same fields, its git blob hash among them) and rewrites
the table in docs/testing.md; this module only scores (so the two do not import each other).
SCRIPTS is the list to edit when a script's tests move: a script and the tests that run it.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.shell_mutants import script_mutants

ROOT = Path(__file__).resolve().parent.parent
_CLAIMS_HOST = "tests/integration/test_claims_host.py"
_SHELL_HOST = "tests/integration/test_shell_host.py"
_HOST_SHELL = "tests/integration/test_host_shell.py"
_DRAIN = "tests/integration/test_drain_launch.py"
# the drain tests that run launch.sh on a host, not an engine
_DRAIN_HOST = [f"{_DRAIN}::test_a_launch_waits_on_the_host_until_its_gpu_drains",
               f"{_DRAIN}::test_a_gpu_that_does_not_drain_in_time_refuses_the_launch_and_"
               "leaves_nothing",
               f"{_DRAIN}::test_a_malformed_drain_line_starts_nothing",
               f"{_DRAIN}::test_a_gpu_reading_exactly_the_free_threshold_has_not_drained",
               f"{_DRAIN}::test_a_wait_of_n_rounds_reads_the_gpus_n_plus_one_times_then_refuses"]
_LAUNCH = "tests/integration/test_launch_script.py"
_CLAIMS_EDGES = "tests/integration/test_claims_script_edges.py"
_RULES_EDGES = "tests/integration/test_rules_script_edges.py"
_FAIR_EDGES = "tests/integration/test_fair_turns_script_edges.py"
_GRACEFUL = "tests/integration/test_graceful_stop.py"
_SLURM = "tests/integration/test_slurm.py"
SCRIPTS: dict[str, list[str]] = {
    "eq_tui/hosts/scripts/launch.sh": [_LAUNCH, _HOST_SHELL, _SHELL_HOST, _CLAIMS_HOST,
                                       *_DRAIN_HOST],
    "eq_tui/hosts/scripts/_claims.sh": [_CLAIMS_EDGES, _CLAIMS_HOST, _HOST_SHELL],
    "eq_tui/hosts/scripts/_claim_launch.sh": [_CLAIMS_EDGES, _RULES_EDGES, _FAIR_EDGES,
                                              _CLAIMS_HOST],
    "eq_tui/hosts/scripts/_drain_wait.sh": _DRAIN_HOST,
    "eq_tui/hosts/scripts/_rules_launch.sh": [_RULES_EDGES, _CLAIMS_HOST],
    # not test_claims_two_users.py's two-engine runs (minutes for every mutant that survives):
    # the turns' edges run through launch.sh itself, the hand-over between engines in the
    # claims bed
    "eq_tui/hosts/scripts/_fair_turns.sh": [_FAIR_EDGES, _CLAIMS_HOST],
    # the attempt wrapper, as run.sh under screen/tmux (the launch tests) and as a Slurm batch
    # script (a stop that lets the job save, the times it records)
    "eq_tui/hosts/scripts/_job_wrapper.sh": [
        _LAUNCH, _HOST_SHELL, _SHELL_HOST, _CLAIMS_HOST, _GRACEFUL,
        f"{_SLURM}::test_every_attempt_has_the_times_its_batch_script_recorded",
        f"{_SLURM}::test_phased_sweep_with_an_oom_retry_runs_to_the_end"],
}
# Survivors no test can kill because no input tells them from the script: each argued under
# its script in docs/testing.md. They stay survivors in the score; the floor the host scripts
# are held to (tests/unit/test_mutation_scores.py) is over the mutants less these.
EQUIVALENT: dict[str, tuple[str, ...]] = {
    "eq_tui/hosts/scripts/_job_wrapper.sh": ("L19:if/true", "L27:>/>>", "L40:test/true",
                                             "L58:>/>>"),
    "eq_tui/hosts/scripts/_drain_wait.sh": ("L30:||/&&",),
    "eq_tui/hosts/scripts/_rules_launch.sh": ("L40:test/true", "L52:test/true"),
    "eq_tui/hosts/scripts/_claims.sh": ("L40:if/true", "L45:test/true", "L45:-ge/-gt",
                                        "L45:return1/0"),
    "eq_tui/hosts/scripts/_claim_launch.sh": ("L16:if/true", "L17:>/>>", "L57:test/true",
                                              "L120:-gt/-ge", "L151:return1/0"),
    "eq_tui/hosts/scripts/_fair_turns.sh": ("L18:test/true", "L18:&&/||", "L18:test/true#2",
                                            "L21:if/false", "L34:test/true",
                                            "L48:test/true#2", "L58:-gt/-ge",
                                            "L134:-gt/-ge"),
    "eq_tui/hosts/scripts/launch.sh": ("L45:>/>>", "L47:>/>>", "L85:>/>>", "L124:>/>>",
                                       "L135:>/>>", "L137:>/>>", "L109:test/true",
                                       "L130:exit0/1", "L142:exit0/1", "L134:-ge/-gt",
                                       "L136:test/true"),
}
CANARY = "exit 97\n"
TIMES_PLUGIN = '''
import json, os

TIMES = {}


def pytest_runtest_logreport(report):
    TIMES[report.nodeid] = TIMES.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session):
    with open(os.environ["EQ_MUTATION_TIMES"], "w") as out:
        json.dump(TIMES, out)
'''


def blob_hash(data: bytes) -> str:
    """What `git hash-object` prints for these bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def equivalent(script: str, entry: dict[str, object]) -> list[str]:
    """The survivors of a recorded score that EQUIVALENT names."""
    surviving = entry.get("surviving")
    assert isinstance(surviving, list)
    return [name for name in surviving if name in EQUIVALENT.get(script, ())]


def less_equivalent(script: str, entry: dict[str, object]) -> str:
    """A score's words for its mutants less the equivalent ones ('' when there are none)."""
    same = equivalent(script, entry)
    if not same:
        return ""
    mutants, killed = int(str(entry["mutants"])), int(str(entry["killed"]))
    return f" ({100 * killed / (mutants - len(same)):.1f} % less {len(same)} equivalent)"


def prepare() -> Path:
    """A copy of the checkout the tests run in (and a plugin that times them)."""
    work = Path(tempfile.mkdtemp(prefix="eq-shmut-"))
    for name in ("eq_tui", "tests", "themes", "sample_manifests", "docs"):
        shutil.copytree(ROOT / name, work / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
    (work / "eq_mutation_times.py").write_text(TIMES_PLUGIN)
    return work


class Runner:
    """Runs the selected tests in the copy; a run is killed when any fails or runs too long."""

    def __init__(self, work: Path, tests: list[str]) -> None:
        self.work, self.tests = work, tests
        self.test_limit, self.run_limit = 300.0, 3600.0

    def run(self, tests: list[str], *, times: bool = False) -> tuple[str, float]:
        args = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-n", "0",
                f"--timeout={self.test_limit:.0f}", *tests]
        env = dict(os.environ, PYTHONPATH=str(self.work),
                   EQ_MUTATION_TIMES=str(self.work / "times.json"))
        env.pop("PYTEST_ADDOPTS", None)
        if times:
            args[3:3] = ["-p", "eq_mutation_times"]
        began = time.monotonic()
        # a session of its own: a run out of time is ended with everything it started
        proc = subprocess.Popen(args, cwd=self.work, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=self.run_limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return "timeout", time.monotonic() - began
        self.last_output = out.decode(errors="replace")
        if proc.returncode == 0:
            return "survived", time.monotonic() - began
        if proc.returncode in (1, 2) and "Timeout" in self.last_output:
            return "timeout", time.monotonic() - began
        if proc.returncode == 1:
            return "killed", time.monotonic() - began
        return f"error {proc.returncode}", time.monotonic() - began

    def baseline(self) -> list[str]:
        """The tests' node ids, fastest first (their unmutated run must pass)."""
        status, took = self.run(self.tests, times=True)
        if status != "survived":
            raise RuntimeError(f"the unmutated tests do not pass ({status}):\n"
                               f"{self.last_output[-3000:]}")
        times: dict[str, float] = json.loads((self.work / "times.json").read_text())
        # a mutant may slow a test down (a wait that runs out) without failing it
        self.test_limit = max(60.0, 4 * max(times.values()))
        self.run_limit = 3 * took + 120
        return sorted(times, key=lambda node: times[node])


def score(script: str, tests: list[str], *, keep: bool = False, diff: bool = False,
          only: tuple[str, ...] = ()) -> dict[str, object]:
    source = (ROOT / script).read_text()
    found = [m for m in script_mutants(ROOT / script) if not only or m.name in only]
    commit = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.strip()
    work = prepare()
    target = work / script
    runner = Runner(work, tests)
    try:
        ordered = runner.baseline()
        print(f"{script}: {len(found)} mutants, {len(ordered)} tests; a test may take "
              f"{runner.test_limit:.0f} s, a run {runner.run_limit:.0f} s", flush=True)
        target.write_text(CANARY + source)
        status, _ = runner.run(ordered)
        if status == "survived":
            raise RuntimeError(f"{script} with `exit 97` first passes its tests: they do not "
                               "run the copy's script")
        by_status: dict[str, int] = {}
        surviving: list[str] = []
        for i, mutant in enumerate(found, 1):
            target.write_text(mutant.apply(source))
            status, took = runner.run(ordered)
            print(f"[{i}/{len(found)}] {mutant.name}: {status} ({took:.1f} s)", flush=True)
            by_status[status] = by_status.get(status, 0) + 1
            if status not in ("killed", "timeout"):
                surviving.append(mutant.name)
        target.write_text(source)
    finally:
        if keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    killed = len(found) - len(surviving)
    report: dict[str, object] = {
        "module": script, "mutants": len(found), "killed": killed,
        "survivors": len(surviving), "no_tests": 0,
        "score": round(killed / len(found), 4) if found else None, "commit": commit,
        "blob": blob_hash((ROOT / script).read_bytes()),
        "date": datetime.datetime.now(datetime.UTC).date().isoformat(), "tests": tests,
        "by_status": by_status, "surviving": surviving}
    if diff:
        named = {m.name: m for m in found}
        report["diffs"] = {name: named[name].diff(source) for name in surviving}
    return report


def rerun_survivors(script: str, entry: dict[str, object]) -> dict[str, object]:
    """`entry`, the script's recorded score, with its survivors run again against the tests as
    they are now: a test added since kills what it kills (added tests never save a mutant that
    was killed)."""
    if entry["blob"] != blob_hash((ROOT / script).read_bytes()):
        raise SystemExit(f"{script} changed since its score: score it whole again")
    surviving = entry["surviving"]
    assert isinstance(surviving, list)
    again = score(script, SCRIPTS[script], only=tuple(surviving))
    left = again["surviving"]
    assert isinstance(left, list)
    still = [name for name in surviving if name in left]
    mutants_n = int(str(entry["mutants"]))
    return {**entry, **{key: again[key] for key in ("module", "commit", "date", "tests")},
            "killed": mutants_n - len(still), "survivors": len(still),
            "score": round((mutants_n - len(still)) / mutants_n, 4), "surviving": still}


def listing(script: str) -> list[str]:
    source = (ROOT / script).read_text()
    return [f"{m.name}\n{m.diff(source)}" for m in script_mutants(ROOT / script)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", help="script paths (default: all of SCRIPTS)")
    parser.add_argument("--keep", action="store_true", help="keep each script's copy")
    parser.add_argument("--diff", action="store_true", help="include the survivors' diffs")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--only", nargs="+", default=(), metavar="NAME",
                        help="run only these mutants")
    parser.add_argument("--tests", nargs="+", metavar="TEST",
                        help="run these tests instead of the script's")
    args = parser.parse_args()
    for script in args.scripts or list(SCRIPTS):
        if script not in SCRIPTS:
            parser.error(f"{script} is not in SCRIPTS (bench/shell_mutation.py): add it with "
                         "its tests")
        if args.list:
            print("\n".join(listing(script)))
            continue
        report = score(script, args.tests or SCRIPTS[script], keep=args.keep, diff=args.diff,
                       only=tuple(args.only))
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
