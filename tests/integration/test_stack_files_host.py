"""read_metrics.sh on a real shell: the files the stacks write in a job's cwd are found, dated by
the attempt (only what was written while it ran), told apart from other jobs' in a shared cwd,
and carried back (text, or an event file in base64 or od's hex) to be parsed."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from eq_tui.hosts.local import LocalRunner
from eq_tui.manifest.model import MetricsSpec
from eq_tui.results import collect as collect_module
from eq_tui.results.collect import Collected, collect, wanted_files
from eq_tui.results.stack_files import TB_SKIPPED

FILES = Path(__file__).parents[1] / "fixtures" / "files"
EVAL = FILES / "hf_trainer_state_eval.json"  # has eval_accuracy
TRAIN = FILES / "hf_trainer_state_train.json"  # has train_runtime
T0 = time.time() - 10_000


def at(path: Path, offset: float) -> Path:
    os.utime(path, (T0 + offset, T0 + offset))
    return path


def attempt(logs: Path, job: str, cmd: str, start: float, end: float | None) -> Path:
    """An attempt dir as launch.sh leaves it: `cmd` written before the job starts, `exit` once
    it ended (None: still running)."""
    adir = logs / job / "a1"
    adir.mkdir(parents=True)
    (adir / "cmd").write_text(cmd)
    at(adir / "cmd", start)
    if end is not None:
        (adir / "exit").write_text("0\n")
        at(adir / "exit", end)
    return adir


def put(src: Path | bytes, dest: Path, offset: float) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(src, bytes):
        dest.write_bytes(src)
    else:
        shutil.copyfile(src, dest)
    return at(dest, offset)


async def read(adir: Path, cwd: Path, spec: MetricsSpec | None = None,
               runner: LocalRunner | None = None) -> Collected:
    wanted = wanted_files(spec, attempt_dir=str(adir), run_dir="/r", job_id="j", attempt=1)
    return await collect(runner or LocalRunner(), wanted, cwd=str(cwd))


def events_bytes(tmp: Path) -> bytes:
    logdir = tmp / "writer"
    writer = EventFileWriter(str(logdir))
    for step, loss in enumerate([0.5, 0.25], 1):
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="val_loss",
                                                                       simple_value=loss)])
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
    writer.close()
    data = next(logdir.glob("events.out.tfevents.*")).read_bytes()
    shutil.rmtree(logdir)
    return data


@pytest.fixture
def place(tmp_path: Path) -> tuple[Path, Path]:
    work = tmp_path / "work dir"  # a cwd with a space
    work.mkdir()
    return work, tmp_path / "run" / "logs"


@pytest.mark.asyncio
async def test_hf_state_discovered_newest_of_the_attempt(place: tuple[Path, Path]) -> None:
    work, logs = place
    adir = attempt(logs, "a", "python run_glue.py --output_dir out_a", 0, 100)
    put(TRAIN, work / "out_a" / "checkpoint-2" / "trainer_state.json", 50)
    put(EVAL, work / "out_a" / "trainer_state.json", 60)  # save_state() after the last checkpoint
    put(TRAIN, work / "old" / "trainer_state.json", -10)  # an earlier run's
    found = await read(adir, work)
    assert found.metrics["eval_accuracy"][-1] == 0.9180227202947497
    assert "train_runtime" not in found.metrics
    assert found.sources == ("out_a/trainer_state.json",)
    assert found.notes == ()


@pytest.mark.asyncio
async def test_files_written_before_or_after_the_attempt_are_not_its_own(
        place: tuple[Path, Path]) -> None:
    work, logs = place
    adir = attempt(logs, "a", "train", 0, 100)
    put(EVAL, work / "before" / "trainer_state.json", -1)
    put(EVAL, work / "after" / "trainer_state.json", 101)
    put(FILES / "lightning_metrics_val.csv", work / "lightning_logs" / "version_0" / "metrics.csv",
        -1)
    found = await read(adir, work)
    assert found.metrics == {} and found.sources == () and found.notes == ()


@pytest.mark.asyncio
async def test_shared_cwd_the_command_names_the_jobs_own(place: tuple[Path, Path]) -> None:
    work, logs = place
    a = attempt(logs, "a", "python train.py --output_dir=./out_a --lr 0.1", 0, 100)
    b = attempt(logs, "b", "python train.py --output_dir=./out_b --lr 0.01", 5, 95)
    put(EVAL, work / "out_a" / "trainer_state.json", 50)
    put(TRAIN, work / "out_b" / "trainer_state.json", 60)  # newer, but b's
    found_a, found_b = await read(a, work), await read(b, work)
    assert "eval_accuracy" in found_a.metrics and "train_runtime" not in found_a.metrics
    assert "train_runtime" in found_b.metrics and "eval_accuracy" not in found_b.metrics
    # a job whose command names neither, while the others ran: not read, and said
    c = attempt(logs, "c", "python train.py --config c.yaml", 2, 98)
    found_c = await read(c, work)
    assert found_c.metrics == {}
    (note,) = found_c.notes
    assert "out_a" in note and "out_b" in note and "hf_state" in note


@pytest.mark.asyncio
async def test_alone_in_its_window_the_newest_is_read(place: tuple[Path, Path]) -> None:
    work, logs = place
    attempt(logs, "a", "train", 0, 100)  # ended before d started
    d = attempt(logs, "d", "python train.py --config d.yaml", 200, 300)
    put(EVAL, work / "results" / "checkpoint-9" / "trainer_state.json", 250)
    found = await read(d, work)
    assert found.sources == ("results/checkpoint-9/trainer_state.json",)


@pytest.mark.asyncio
async def test_lightning_csv_before_tensorboard(place: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    work, logs = place
    adir = attempt(logs, "a", "python lightning_train.py", 0, 100)
    version = work / "lightning_logs" / "version_3"
    put(FILES / "lightning_metrics_val.csv", version / "metrics.csv", 40)
    put(events_bytes(tmp_path), version / "events.out.tfevents.1.host.1.0", 40)
    found = await read(adir, work)
    assert found.metrics == {"train_loss": [0.21007005870342255, 0.19502906501293182],
                             "val_loss": [0.21559028327465057, 0.14366206526756287]}
    assert found.sources == ("lightning_logs/version_3/metrics.csv",)


@pytest.mark.asyncio
async def test_tensorboard_events_in_base64_and_in_hex(place: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    work, logs = place
    adir = attempt(logs, "a", "python lightning_train.py", 0, 100)
    put(events_bytes(tmp_path), work / "lightning_logs" / "version_0" /
        "events.out.tfevents.1700000000.host.1.0", 40)
    found = await read(adir, work)
    assert found.metrics == {"val_loss": [0.5, 0.25]}
    assert found.sources == ("lightning_logs/version_0/events.out.tfevents.1700000000.host.1.0",)
    # a host without base64: od's hex
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("sh", "wc", "tr", "head", "tail", "cat", "od"):
        os.symlink(shutil.which(tool) or tool, tools / tool)
    without = LocalRunner(env={"PATH": str(tools), "HOME": str(tmp_path)})
    assert (await read(adir, work, runner=without)).metrics == found.metrics


@pytest.mark.asyncio
async def test_tensorboard_without_the_extra_is_a_note(place: tuple[Path, Path], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    work, logs = place
    adir = attempt(logs, "a", "train", 0, 100)
    put(events_bytes(tmp_path), work / "runs" / "May01_host" / "events.out.tfevents.1.h", 40)
    monkeypatch.setattr(collect_module, "tensorboard_available", lambda: False)
    found = await read(adir, work)
    assert found.metrics == {} and found.notes == (TB_SKIPPED,)
    assert "pip install 'eq-tui[tensorboard]'" in TB_SKIPPED and "\n" not in TB_SKIPPED


@pytest.mark.asyncio
async def test_named_glob_and_tensorboard_dir(place: tuple[Path, Path], tmp_path: Path) -> None:
    work, logs = place
    adir = attempt(logs, "a", "train", 0, 100)
    put(TRAIN, work / "out" / "checkpoint-1" / "trainer_state.json", 30)
    put(EVAL, work / "out" / "checkpoint-2" / "trainer_state.json", 40)
    put(EVAL, work / "out" / "checkpoint-3" / "trainer_state.json", -5)  # a run before
    found = await read(adir, work, MetricsSpec(hf_state="out/checkpoint-*/trainer_state.json"))
    assert found.sources == ("out/checkpoint-2/trainer_state.json",)
    put(events_bytes(tmp_path), work / "tb logs" / "run 1" / "events.out.tfevents.2.h", 50)
    found = await read(adir, work, MetricsSpec(tensorboard="tb logs"))
    assert found.metrics == {"val_loss": [0.5, 0.25]}
    assert found.sources == ("tb logs/run 1/events.out.tfevents.2.h",)
