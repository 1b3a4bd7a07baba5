"""The one parser of progress out of a log line: the shapes it reads, the noise it leaves alone,
and properties over generated lines."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from eq_tui.api.progress_line import progress_fraction

# what a training script prints around its progress, none of it progress
NOISE = ("loss=0.4123", "lr=1/3", "lr 3e-4", "2026/11/23 12:00:01", "/data/run_3/10/ckpt.pt",
         "saving epoch_3/10.ckpt", "GPU 45%", "mem 12.0/24.0 GiB", "acc 0.91", "[rank0]",
         "train/epoch=3/10", "out of memory", "| grad_norm 1.2 |", "")
COUNTERS = ("epoch {a}/{b}", "Epoch [{a}/{b}]", "Epoch: {a}/{b}", "epoch {a} / {b}",
            "step {a}/{b}", "Step [{a}/{b}]", "iter {a} of {b}", "batch={a}/{b}")
words = st.sampled_from(NOISE)
LABELS = re.compile(r"\b(?:of|done|complete|progress)\b", re.IGNORECASE)  # they make progress
counts = st.integers(min_value=1, max_value=100_000).flatmap(
    lambda b: st.tuples(st.integers(min_value=0, max_value=b), st.just(b)))


@pytest.mark.parametrize(("line", "fraction"), [
    ("45%|████▌     | 450/1000 [00:10<00:12, 43.2it/s]", 0.45),
    ("train:  45%|####5     | 4.50k/10.0k [00:10<00:12, 430it/s]", 0.45),
    ("100%|██████████| 1000/1000 [01:40<00:00, 10.0it/s]", 1.0),
    ("Epoch 3: 45%|████▌     | 450/1000 [00:10<00:12, v_num=1]", 0.45),  # Lightning
    (" 450/1000 [=====>........] - ETA: 12s - loss: 0.41", 0.45),  # Keras
    ("epoch 3/10 loss=0.4", 0.3),
    ("step 1200/5000", 0.24),
    ("Epoch [3/10] loss 0.2", 0.3),
    ("iter 7 of 20", 0.35),
    ("Epoch 3/10.", 0.3),
    ("step 50% done, 12.0/24.0 GiB", 0.5),
    ("progress: 42%", 0.42),
    # an epoch counter beside a bar or a step counter is the outer loop
    ("Epoch 3/10: 45%|████▌     | 450/1000 [00:10<00:12, 43.2it/s]", 0.245),
    ("Epoch [3/10], Step [100/500], Loss: 0.2", 0.22),
    ("Epoch 0/10: 50%|#####     | 5/10", 0.05),
    # noise beside a counter is left alone
    ("2026/11/23 12:00:01 epoch 3/10 lr=1/3", 0.3),
])
def test_it_reads_bars_counters_and_labelled_percentages(line: str, fraction: float) -> None:
    assert progress_fraction(line) == pytest.approx(fraction)


@pytest.mark.parametrize("line", [
    *NOISE, "epoch 7/6", "step 2026/11/23", "checkpoints/epoch 3/10.ckpt", "150%|####| 3/2",
    "loss 3/10", "42%", "450it [00:10, 43.2it/s]"])
def test_dates_paths_ratios_and_overflows_are_not_progress(line: str) -> None:
    assert progress_fraction(line) is None


@given(counts, words, words, st.sampled_from(("", "train: ", "Validating: ")))
@example((450, 1000), "", "", "")
def test_a_tqdm_bar_gives_its_counts(count: tuple[int, int], before: str, after: str,
                                     desc: str) -> None:
    a, b = count
    bar = "█" * (10 * a // b) + " " * (10 - 10 * a // b)
    line = f"{before} {desc}{100 * a / b:3.0f}%|{bar}| {a}/{b} [00:10<00:12, 43.2it/s] {after}"
    assert progress_fraction(line) == pytest.approx(a / b)


@given(counts, st.sampled_from(COUNTERS), words, words)
@example((3, 10), "Epoch [{a}/{b}]", "2026/11/23 12:00:01", "lr=1/3")
def test_an_epoch_or_step_counter_gives_a_over_b(count: tuple[int, int], form: str,
                                                 before: str, after: str) -> None:
    a, b = count
    line = f"{before} {form.format(a=a, b=b)} {after}"
    assert progress_fraction(line) == pytest.approx(a / b)


@given(st.lists(words, max_size=6),
       st.text(st.characters(blacklist_characters="%/", blacklist_categories=("Cs",)),
               max_size=60).filter(lambda text: not LABELS.search(text)))
def test_a_line_without_progress_gives_none(noise: list[str], text: str) -> None:
    assert progress_fraction(" ".join([*noise, text])) is None
