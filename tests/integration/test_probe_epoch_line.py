"""probe.sh's epoch line (`E`): the last line of a running log's tail that states an epoch
counter, beside its last line, so Keras's `Epoch 5/8` is seen though its bar redraws after it
(many times a second, soon filling the 2 KiB the last line needs)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from eq_tui.hosts.base import AttemptRef, ProbeRequest
from eq_tui.hosts.local import LocalRunner
from eq_tui.hosts.shell_host import ShellHost
from tests.integration.test_shell_host import environment

pytestmark = pytest.mark.integration


def keras_redraws(first: int, last: int) -> bytes:
    """Keras 2's Progbar as it writes a terminal: '\b' * the previous width, '\r', the bar."""
    out = b""
    for n in range(first, last + 1):
        out += b"\x08" * 90 + b"\r" + f"{n:>4}/469 [==>...........] - ETA: 7:20 - loss: 0.6191"\
            .encode()
    return out


LOGS: dict[str, bytes] = {
    "keras": b"Epoch 4/8\n" + keras_redraws(400, 469) + b"\nEpoch 5/8\n" + keras_redraws(1, 58),
    "lightning": b"Epoch 3:  40%|####  | 20/50 [00:10<00:12, v_num=0]\r"
                 b"Epoch 3:  42%|####  | 21/50 [00:10<00:12, v_num=0]",
    "plain": b"loading data\nstep 10 loss=0.4\n",
    "out_of_reach": b"Epoch 1/8\n" + keras_redraws(1, 300),
    "ansi": b"\x1b[1mEpoch 2/3\x1b[0m\n" + keras_redraws(1, 5),
}


@pytest.fixture
def sockets() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="eqsh-"))
    for name in ("screen", "tmux"):
        (path / name).mkdir(mode=0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_the_probe_returns_the_last_epoch_line_beside_the_last_line(
        tmp_path: Path, sockets: Path) -> None:
    # the epoch line is out of the last line's 2 KiB (but within the probe's 32)
    assert 2048 < len(keras_redraws(1, 58)) < 32768 < len(keras_redraws(1, 300))
    env = environment(tmp_path, sockets)
    refs = []
    for name, text in LOGS.items():
        attempt = tmp_path / "logs" / name / "a1"
        attempt.mkdir(parents=True)
        (attempt / "log").write_bytes(text)
        refs.append(AttemptRef(name, f"eqt_epoch_{name}", str(attempt), None))
    host = ShellHost("t", LocalRunner(env), session_prefix="eqt_epoch_", query_gpus=False)
    snap = await host.probe(ProbeRequest(attempts=tuple(refs), cwd=str(tmp_path)))
    assert snap.ok, snap.error
    epoch = {key: probe.epoch_line for key, probe in snap.attempts.items()}
    last = {key: probe.last_line for key, probe in snap.attempts.items()}
    assert epoch == {"keras": "Epoch 5/8", "lightning": "", "plain": "",
                     "out_of_reach": "", "ansi": "Epoch 2/3"}
    assert last["keras"] == "  58/469 [==>...........] - ETA: 7:20 - loss: 0.6191"
    assert last["lightning"].startswith("Epoch 3:  42%")
