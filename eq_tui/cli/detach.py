"""`--detach`: start each manifest's engine in the background, wait until it answers on its
control socket, say how to attach and stop it (and, for an existing run, how far it got), and
return. A run whose queue has already finished is told so, with its counts and how to start
over; the exit code is then its queue's."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from eq_tui.api.control_client import ControlClient
from eq_tui.api.model import FINISHED, JobState, status_counts
from eq_tui.cli.status_report import load_jobs
from eq_tui.errors import RunDirError
from eq_tui.manifest.secrets import SECRETS_STDIN_FLAG, hand_over_bytes, handed_over, resolve

HEALTHY_WITHIN_S = 60.0
# cli/remote/start.py reads these lines from a --detach run on a host
FINISHED_MARK = "eq-tui: finished:"
RESUMING_MARK = "eq-tui: resuming "


def engine_command(manifest: str, run_dir: Path, poll: float | None,
                   secrets: bool = False, ssh_config: str | None = None,
                   extra: Sequence[str] = ()) -> list[str]:
    command = [sys.executable, "-m", "eq_tui", manifest, "--no-ui", "--run-dir", str(run_dir),
               *extra]
    if poll is not None:
        command += ["--poll", str(poll)]
    if ssh_config is not None:
        command += ["--ssh-config", ssh_config]
    if secrets:
        command.append(SECRETS_STDIN_FLAG)
    return command


def _secrets_here(manifests: list[str]) -> list[dict[str, str]]:
    """The secrets this process can read for each manifest (an `attach --resume`)."""
    from eq_tui.manifest.loader import load_manifest

    return [handed_over(resolve(load_manifest(manifest))) for manifest in manifests]


async def _wait_healthy(process: subprocess.Popen[bytes],
                        run_dir: Path) -> tuple[str, Progress | None]:
    """("up", its progress) once the engine answers on its control socket; "finished" when it
    answers with every job finished (it exits at its first tick) or exits before answering
    with the state file saying so; "failed" otherwise."""
    deadline = time.monotonic() + HEALTHY_WITHIN_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            progress = saved_progress(run_dir)
            finished = progress is not None and progress.done == progress.total
            return ("finished" if finished and process.returncode in (0, 1) else "failed",
                    progress)
        try:
            client = await ControlClient.connect(run_dir)
        except (OSError, ConnectionError, RuntimeError):
            await asyncio.sleep(0.1)
            continue
        snapshot = client.snapshot()
        await client.close()
        jobs = [JobState.from_json(dict(raw)) for raw in snapshot.get("jobs") or []]
        progress = progress_of(jobs)
        # every job finished (the manifest, as edited, adds none): its first tick ends it
        finished = snapshot.get("finished") or progress.done == progress.total
        return "finished" if finished else "up", progress
    return "failed", None


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no engine log)"


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    counts: dict[str, int]
    needing: tuple[str, ...] = ()  # the jobs that need a person (stuck, killed, blocked)

    @property
    def counts_text(self) -> str:
        return ", ".join(f"{status} {n}" for status, n in self.counts.items()) or "no jobs"


def saved_progress(run_dir: Path) -> Progress | None:
    """How far the run in `run_dir` got, from its state file; None when it has none."""
    if not (run_dir / "queue_state.json").exists():
        return None
    try:
        _saved, jobs = load_jobs(run_dir)
    except (RunDirError, OSError, ValueError):
        return None
    return progress_of(jobs)


def progress_of(jobs: list[JobState]) -> Progress:
    return Progress(done=sum(1 for job in jobs if job.status in FINISHED), total=len(jobs),
                    counts=status_counts(jobs),
                    needing=tuple(job.id for job in jobs if job.status.needs_person))


def finished_message(manifest: str, run_dir: Path, progress: Progress | None, code: int
                     ) -> str:
    """What --detach says of a run that has finished: its counts, how to run again the jobs
    that need a person, how to start over."""
    counts = progress.counts_text if progress is not None else "no state file"
    lines = [f"{FINISHED_MARK} the run in {run_dir} has finished ({counts}; exit {code}): "
             f"nothing to run for {manifest}"]
    needing = progress.needing if progress is not None else ()
    if needing:
        jobs = " ".join(map(shlex.quote, needing)) if len(needing) <= 5 else "JOB..."
        lines.append(f"  run again:   eq-tui retry {shlex.quote(str(run_dir))} {jobs}   (starts "
                     "its engine in the background; so do edit, requeue, add...)")
    if progress is not None and progress.counts.get("stuck"):
        every = shlex.join(["eq-tui", manifest, "--detach", "--retry-stuck"])
        lines.append(f"  every stuck: {every}")
    start_over = shlex.join(["eq-tui", manifest, "--fresh", "--detach"])
    lines.append(f"  start over:  {start_over}   (archives the run dir first)")
    return "\n".join(lines)


def _wait_exit(process: subprocess.Popen[bytes]) -> int:
    try:
        return process.wait(timeout=HEALTHY_WITHIN_S)
    except subprocess.TimeoutExpired:
        process.terminate()
        return process.wait()


@dataclass
class Started:
    """An engine started in the background: how its start went (`outcome` as _wait_healthy
    says), how far its run is (`now`), and how far it was before (`before`)."""

    process: subprocess.Popen[bytes]
    outcome: str
    now: Progress | None
    before: Progress | None
    log: Path


def _start_one(manifest: str, run_dir: Path, poll: float | None, values: dict[str, str], *,
               ssh_config: str | None, extra: Sequence[str]) -> Started:
    before = saved_progress(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "engine.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            engine_command(manifest, run_dir, poll, bool(values), ssh_config, extra),
            stdin=subprocess.PIPE if values else subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True, cwd=os.getcwd())
    if process.stdin is not None:
        try:
            process.stdin.write(hand_over_bytes(values))
            process.stdin.close()
        except OSError:
            pass  # it died at once: _wait_healthy says so with its log
    outcome, now = asyncio.run(_wait_healthy(process, run_dir))
    if outcome == "failed":
        exited = process.poll()
        if exited is None:
            process.terminate()
        raise RunDirError(f"the engine for {manifest} did not come up "
                          f"(exit {exited}); last lines of {log}:\n{_log_tail(log)}")
    return Started(process, outcome, now, before, log)


def start_detached(manifests: list[str], run_dirs: list[Path], poll: float | None,
                   secrets: list[dict[str, str]] | None = None, *,
                   ssh_config: str | None = None, extra: Sequence[str] = ()) -> int:
    """Start each engine; a run already finished is told so (exit: its queue's exit code).
    `secrets`: per manifest, the from_env/from_file values to hand to its engine over its
    stdin (None: whatever this process can read). `extra`: flags for each engine
    (--retry-stuck, --await-command)."""
    codes = [0]
    handed = _secrets_here(manifests) if secrets is None else secrets
    waits = "--await-command" in extra  # it answers, finished or not, and waits for a command
    for manifest, run_dir, values in zip(manifests, run_dirs, handed, strict=True):
        started = _start_one(manifest, run_dir, poll, values, ssh_config=ssh_config,
                             extra=extra)
        if started.outcome == "finished" and not waits:
            code = _wait_exit(started.process)
            codes.append(code)
            print(finished_message(manifest, run_dir, saved_progress(run_dir), code))
            continue
        # the engine's numbers: an edited manifest may have added or removed jobs
        before, now = started.before, started.now
        if before is not None and now is not None:
            print(f"{RESUMING_MARK}{run_dir}: {now.done} of {now.total} jobs done")
        print(f"eq-tui: engine for {manifest} is running in the background "
              f"(pid {started.process.pid}); run dir {run_dir}\n"
              f"  watch:  eq-tui attach {run_dir}\n"
              f"  status: eq-tui status {run_dir}\n"
              f"  stop:   eq-tui stop {run_dir}   (jobs keep running; the next run resumes)\n"
              f"  log:    {started.log}")
    return max(codes)


# seconds an engine started for a shell verb waits for its command (the verb sends it as soon
# as the engine answers): then it launches, and a finished queue ends it, as usual
AWAIT_COMMAND_S = 120.0


def recorded_manifest(run_dir: Path) -> str | None:
    """The manifest a run dir's run was started from (its manifest.json says), as a path that
    reads from here: a relative one that is not found from here is looked for beside the run
    dir's experiment_queue/ folder, where a default run dir puts it."""
    try:
        saved = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    source = saved.get("source") if isinstance(saved, dict) else None
    if not isinstance(source, str) or not source:
        return None
    path = Path(source)
    if path.is_absolute() or path.exists():
        return source
    beside = run_dir.resolve().parent.parent / path.name
    return str(beside) if beside.exists() else source


def start_for_command(run_dir: Path, verb: str, ssh_config: str | None = None) -> None:
    """A shell verb on a local run whose engine is not running (its queue finished, or it was
    stopped): start the engine in the background from the manifest the run records, waiting
    for the verb's command (it launches nothing before it, so a `hold` is never late), and say
    so on stderr. RunDirError when there is nothing to start it from."""
    where = shlex.quote(str(run_dir))
    source = recorded_manifest(run_dir)
    if source is None or not Path(source).is_file():
        why = (f"its manifest {source} is not there" if source is not None else
               "its run dir records no manifest")
        raise RunDirError(f"no engine is running for {run_dir}, and none can be started for "
                          f"`eq-tui {verb}` ({why}); start it with `eq-tui MANIFEST --run-dir "
                          f"{where} --detach`, then run the command again")
    started = _start_one(source, run_dir, None, _secrets_here([source])[0],
                         ssh_config=ssh_config, extra=["--await-command", str(AWAIT_COMMAND_S)])
    print(f"eq-tui: no engine was running for {run_dir}: started one in the background for "
          f"`eq-tui {verb}` (pid {started.process.pid}; it exits when its queue is done)\n"
          f"  watch:  eq-tui attach {where}\n"
          f"  log:    {started.log}", file=sys.stderr)


async def _send_stop(run_dir: Path) -> bool:
    try:
        client = await ControlClient.connect(run_dir)
    except (OSError, ConnectionError, RuntimeError):
        return False
    try:
        await client.command("shutdown")
    except ConnectionError:
        pass
    finally:
        await client.close()
    return True


def stop_engine(run_dir: Path) -> int:
    if not asyncio.run(_send_stop(run_dir)):
        raise RunDirError(f"no engine is running for {run_dir}")
    print(f"eq-tui: asked the engine of {run_dir} to stop; its jobs keep running")
    return 0
