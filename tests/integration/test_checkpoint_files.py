"""Which checkpoint a restart resumes from (hosts/checkpoints.py over the real
hosts/scripts/checkpoints.sh, run by sh in a temp working directory): the newest complete file
the glob matches, never one still growing between the script's two looks, never an empty one,
never one a resume has failed on."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from eq_tui.errors import HostError
from eq_tui.hosts.checkpoints import list_checkpoints, newest
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.runner import CommandResult

pytestmark = pytest.mark.asyncio


def saved(path: Path, text: str, age_s: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    then = time.time() - age_s
    os.utime(path, (then, then))


async def test_the_newest_complete_file_the_glob_matches(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt" / "lr0.1"
    saved(ckpt / "epoch-1.pt", "one", 30)
    saved(ckpt / "epoch-2.pt", "two", 20)
    saved(ckpt / "epoch-3.pt", "", 10)  # an empty file is no checkpoint
    saved(ckpt / "notes.txt", "not matched", 5)
    saved(tmp_path / "ckpt" / "lr0.3" / "epoch-9.pt", "another job's", 1)
    (ckpt / "epoch-dir.pt").mkdir()  # a directory is no file
    files = await list_checkpoints(LocalRunner(), str(tmp_path), "ckpt/lr0.1/epoch-*.pt",
                                   host="local")
    assert [f.path for f in files] == ["ckpt/lr0.1/epoch-3.pt", "ckpt/lr0.1/epoch-2.pt",
                                       "ckpt/lr0.1/epoch-1.pt"]
    assert [f.size for f in files] == [0, 3, 3]
    assert files[1].mtime == pytest.approx(time.time() - 20, abs=2)
    chosen = newest(files)
    assert chosen is not None and chosen.path == "ckpt/lr0.1/epoch-2.pt"
    # one a resume failed on is passed over for the one before it
    chosen = newest(files, failed={"ckpt/lr0.1/epoch-2.pt"})
    assert chosen is not None and chosen.path == "ckpt/lr0.1/epoch-1.pt"
    assert newest(files, failed={"ckpt/lr0.1/epoch-2.pt", "ckpt/lr0.1/epoch-1.pt"}) is None
    # nothing matched: no file, no error
    assert await list_checkpoints(LocalRunner(), str(tmp_path), "ckpt/none/*.pt",
                                  host="local") == []


async def test_a_file_still_growing_is_passed_over(tmp_path: Path) -> None:
    saved(tmp_path / "ckpt" / "epoch-1.pt", "complete", 60)
    growing = tmp_path / "ckpt" / "epoch-2.pt"
    stop = threading.Event()
    started = threading.Event()

    def write() -> None:  # a save in progress: a piece every 0.2 s until told to stop
        with growing.open("a") as out:
            while not stop.is_set():
                out.write("x" * 1000)
                out.flush()
                started.set()
                stop.wait(0.2)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert started.wait(10)
        files = await list_checkpoints(LocalRunner(), str(tmp_path), "ckpt/*.pt",
                                       host="local")
    finally:
        stop.set()
        writer.join()
    assert [f.path for f in files] == ["ckpt/epoch-1.pt"]
    # once written, it is the newest
    files = await list_checkpoints(LocalRunner(), str(tmp_path), "ckpt/*.pt", host="local")
    assert files[0].path == "ckpt/epoch-2.pt"


async def test_a_working_directory_that_is_not_there_is_a_host_error(tmp_path: Path) -> None:
    with pytest.raises(HostError, match=r"cannot list checkpoints 'ckpt/\*\.pt': no such "
                                        r"directory"):
        await list_checkpoints(LocalRunner(), str(tmp_path / "gone"), "ckpt/*.pt",
                               host="local")


class Timed(LocalRunner):
    """The real local runner, noting the time limit each listing asks for."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []

    async def run(self, script: str, args: Sequence[str] = (), *, stdin: bytes = b"",
                  timeout: float | None = 30.0) -> CommandResult:
        self.timeouts.append(timeout)
        return await super().run(script, args, stdin=stdin, timeout=timeout)


async def test_no_working_directory_lists_where_the_runner_is_within_30_s(
        tmp_path: Path) -> None:
    """Pins `-` for no working directory (the script stays where the runner is: an absolute
    glob still matches) and the listing's time limit, 30 s (a hung host is a host error)."""
    saved(tmp_path / "ckpt" / "epoch-1.pt", "one", 30)
    runner = Timed()
    files = await list_checkpoints(runner, None, f"{tmp_path}/ckpt/*.pt", host="local")
    assert [(f.path, f.size) for f in files] == [(f"{tmp_path}/ckpt/epoch-1.pt", 3)]
    assert runner.timeouts == [30]


async def test_names_and_errors_that_are_not_utf8_still_read(tmp_path: Path) -> None:
    """Pins the decoding of the script's output and its error with replacement: a file name or
    a directory that is not UTF-8 is listed or named, never a decoding error; and the error is
    cut at 300 characters."""
    odd = os.fsdecode(b"epoch-\xff.pt")
    saved(tmp_path / "ckpt" / odd, "one", 30)
    files = await list_checkpoints(LocalRunner(), str(tmp_path), "ckpt/*.pt", host="local")
    assert [f.path for f in files] == ["ckpt/epoch-\ufffd.pt"]
    gone = str(tmp_path / os.fsdecode(b"gone-\xff"))
    with pytest.raises(HostError, match=r"no such directory: .*gone-\ufffd"):
        await list_checkpoints(LocalRunner(), gone, "ckpt/*.pt", host="local")
    far = str(tmp_path / ("d" * 200) / ("e" * 200))
    with pytest.raises(HostError) as error:
        await list_checkpoints(LocalRunner(), far, "ckpt/*.pt", host="local")
    said = str(error.value).split("'ckpt/*.pt': ", 1)[1]
    assert len(said) == 300 and said.startswith("no such directory: ")
