"""fake-train's --log-style: each style prints the run in the shape of its stack's real output
(tests/fixtures/stacks/), with the same numbers as the plain style; plain is unchanged."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE_TRAIN = ROOT / "eq_tui" / "sim" / "bin" / "fake-train"
FIXTURES = ROOT / "tests" / "fixtures" / "stacks"
NUM = r"(?:nan|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)"

# For each style: the shapes its fixtures show (every pattern must match the style's output and
# at least one fixture of that stack), and how to read the epoch's validation metric from it.
SHAPES: dict[str, dict[str, object]] = {
    "hf": {"shapes": [r"\{'eval_\w*loss': " + NUM, r"'epoch': " + NUM + r"\}"],
           "metric": r"'eval_accuracy': (" + NUM + ")"},
    "lightning": {"shapes": [r"\rEpoch \d+: +\d+%\|[^|]*\| \d+/\d+ \[", r"v_num=\w+",
                             r"\x1b\[A"],
                  "metric": r"val_acc=(" + NUM + r")\]"},
    "keras2": {"shapes": [r"Epoch \d+/\d+\n", r"\d+/\d+ \[=*>?\.*\] - ETA: ",
                          r"\d+/\d+ \[=+\] - \d+s", r"\x08+\r"],
               "metric": r"val_acc\w*: (" + NUM + ")"},
    "keras3": {"shapes": [r"Epoch \d+/\d+\n", r"\d+/\d+ ━+ +\S+ \S+/step - "],
               "metric": r"val_accuracy: (" + NUM + ")"},
    "torchtune": {"shapes": [r"Step \d+ \| loss:" + NUM + r" lr:" + NUM],
                  "metric": None},
    "timm": {"shapes": [r"Train: \d+ \[ *\d+/\d+ \( *\d+%\)\]  Loss: +"
                        + NUM + r" \( *" + NUM + r"\)",
                        r"Test: \[ *\d+/\d+\]  Time: .*Acc@1: +" + NUM + r" \( *" + NUM + r"\)"],
             "metric": r"Test: \[ *(\d+)/\1\].*Acc@1: +" + NUM + r" \( *(" + NUM + r")\)"},
    "nanogpt": {"shapes": [r"iter \d+: loss " + NUM + r", time " + NUM + "ms",
                           r"step \d+: train loss " + NUM + r", val loss " + NUM],
                "metric": None},
    "fairseq": {"shapes": [r"epoch \d{3} \| valid on 'valid' subset \| (?:valid[ _])?loss " + NUM],
                "metric": r"valid on 'valid' subset \|.*\| accuracy (" + NUM + ")"},
    "tqdm": {"shapes": [r"\r *\d+%\|[^|]*\| \d+/\d+ \[\d\d:\d\d<\d\d:\d\d, [\d.]+it/s, loss="],
             "metric": r"acc=(" + NUM + r")\]"},
}


def run(tmp_path: Path, *args: str) -> str:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "config.json").write_text("{}")
    env = {**os.environ, "EQ_SIM_STATE": str(state), "CUDA_VISIBLE_DEVICES": "0",
           "EQ_JOB_ID": "j", "EQ_ATTEMPT": "1"}
    done = subprocess.run([sys.executable, str(FAKE_TRAIN), "--epoch-seconds", "0.02", *args],
                          env=env, capture_output=True, timeout=60, check=True)
    return done.stdout.decode("utf-8")  # as bytes: text mode would turn each \r into \n


def plain_numbers(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^epoch \d+/\d+ loss=(\S+) val_acc=(\S+)$", text, re.MULTILINE)


def fixture_texts(stack: str) -> list[str]:
    found = sorted(FIXTURES.glob(f"{stack}_*.log"))
    assert found, f"no fixture for {stack}"
    return [path.read_bytes().decode("utf-8") for path in found]  # keeps \r


def test_plain_is_the_default_and_unchanged(tmp_path: Path) -> None:
    default = run(tmp_path, "--epochs", "3")
    plain = run(tmp_path, "--epochs", "3", "--log-style", "plain")
    strip = lambda text: re.sub(r"pid=\d+", "pid=", text)  # noqa: E731
    assert strip(default) == strip(plain)
    # the numbers fake-train has always printed for this job, seed and attempt
    assert plain_numbers(default) == [("0.8263", "0.5025"), ("0.3263", "0.7270"),
                                      ("0.1098", "0.8266")]
    assert default.endswith("training finished\n")
    assert "\r" not in default


@pytest.mark.parametrize("style", sorted(SHAPES))
def test_style_has_its_stacks_shape_and_the_runs_numbers(tmp_path: Path, style: str) -> None:
    args = ("--epochs", "3", "--lr", "0.01", "--seed", "4")
    out = run(tmp_path, *args, "--log-style", style)
    expected = plain_numbers(run(tmp_path, *args))
    spec = SHAPES[style]
    fixtures = fixture_texts(style)
    for shape in spec["shapes"]:  # type: ignore[attr-defined]
        assert re.search(shape, out), f"{style} output lacks {shape!r}"
        assert any(re.search(shape, text) for text in fixtures), f"no {style} fixture has {shape!r}"
    assert out.endswith("training finished\n")
    metric = spec["metric"]
    if metric is not None:
        seen = [m.groups()[-1] for m in re.finditer(str(metric), out)]
        values = list(dict.fromkeys(seen))  # a bar repeats its value on every redraw
        assert len(values) == len(expected)
        scale = 100.0 if style in ("timm", "fairseq") else 1.0
        for shown, (_, acc) in zip(values, expected, strict=True):
            assert float(shown) == pytest.approx(float(acc) * scale, abs=0.06 * scale)


@pytest.mark.parametrize("style", ["plain", *sorted(SHAPES)])
def test_a_diverged_run_prints_nan_as_its_stack_does(tmp_path: Path, style: str) -> None:
    out = run(tmp_path, "--epochs", "2", "--nan-after", "1", "--log-style", style)
    nan = {"lightning": "val_loss=nan.0", "hf": "'eval_loss': nan", "keras2": "val_loss: nan",
           "keras3": "val_loss: nan", "torchtune": "loss:nan", "timm": "Loss: nan",
           "nanogpt": "val loss nan", "fairseq": "| loss nan |", "tqdm": "loss=nan",
           "plain": "loss=nan val_acc="}[style]
    assert nan in out
    before = run(tmp_path, "--epochs", "2", "--log-style", style)
    assert nan not in before


def test_styles_pace_the_epoch_with_redraws(tmp_path: Path) -> None:
    out = run(tmp_path, "--epochs", "2", "--log-style", "tqdm")
    bars = re.findall(r"\r *\d+%\|", out)
    assert len(bars) >= 2 * 3  # a few redraws an epoch, not one line at its end


def test_every_fixture_names_its_source_and_expectations() -> None:
    logs = sorted(FIXTURES.glob("*.log"))
    stacks = {path.stem.rsplit("_", 1)[0] for path in logs}
    assert stacks == set(SHAPES)
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    for path in logs:
        meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        assert meta["source"] and meta["expect"]["metrics"], path.name
        assert meta["expect"]["progress"]["unit"] in ("epoch", "step")
        for expect in meta["expect"]["metrics"].values():
            assert isinstance(expect["evaluations"], int) and expect["evaluations"] > 0
            assert expect["last"] == "nan" or isinstance(expect["last"], (int, float))
        assert path.name in readme
    for stack in stacks:
        assert any(json.loads(p.with_suffix(".json").read_text())["expect"]["metrics"]
                   and any(e["last"] == "nan" for e in json.loads(
                       p.with_suffix(".json").read_text())["expect"]["metrics"].values())
                   for p in FIXTURES.glob(f"{stack}_*.log")), f"{stack}: no nan fixture"
