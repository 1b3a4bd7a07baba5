"""The whole job's progress from its lines in order (api/job_progress.py): epoch k of N with the
step inside it, HF's step of max_steps, never a per-epoch or an evaluation bar alone, never
backwards. The lines are each stack's as its source prints them (the shapes named in issue 41;
the verbatim fixtures of tests/fixtures/stacks/ name their sources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eq_tui.api.job_progress import JobProgress
from eq_tui.results.parse import log_lines

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "stacks"


def fed(lines: list[str], cmd: str = "") -> tuple[JobProgress, list[float | None]]:
    """A tracker fed `lines` one a second, and its fraction after each."""
    progress = JobProgress()
    progress.cmd_totals(cmd)
    seen = []
    for at, line in enumerate(lines):
        progress.observe(line, float(at))
        seen.append(progress.fraction)
    return progress, seen


def never_backwards(seen: list[float | None]) -> None:
    known = [f for f in seen if f is not None]
    assert known == sorted(known), known
    assert all(0 <= f <= 1 for f in known)


def keras2_bar(n: int, total: int) -> str:
    done = 30 * n // total
    bar = "=" * max(done - 1, 0) + (">" if done < 30 else "=") + "." * (30 - done)
    return f"{n:>4}/{total} [{bar[:30]}] - ETA: 7:20 - loss: 0.6191 - accuracy: 0.6652"


def test_keras2_epoch_5_of_8_and_step_58_of_469_is_that_far_into_the_whole_job() -> None:
    progress, seen = fed(["Epoch 5/8", keras2_bar(58, 469)])
    assert seen[0] == pytest.approx(4 / 8)  # the epoch has started, not ended
    assert progress.fraction == pytest.approx((4 + 58 / 469) / 8)
    assert (progress.unit, progress.total) == ("epoch", 8)
    assert progress.source == "epoch 5/8 + step 58/469"


def test_the_last_epoch_starting_is_not_the_end() -> None:
    progress, _ = fed(["Epoch 8/8", keras2_bar(1, 469)])
    assert progress.fraction == pytest.approx((7 + 1 / 469) / 8)


def test_keras_bars_that_start_over_are_the_next_epochs_even_when_its_line_was_not_seen() -> None:
    # the probe sees the epoch line once; later only the bar, which starts over each epoch
    lines = ["Epoch 1/4", keras2_bar(100, 469), keras2_bar(469, 469), keras2_bar(30, 469),
             keras2_bar(400, 469), "Epoch 3/4", keras2_bar(10, 469)]
    progress, seen = fed(lines)
    never_backwards(seen)
    assert seen[3] == pytest.approx((1 + 30 / 469) / 4)
    assert progress.fraction == pytest.approx((2 + 10 / 469) / 4)


def test_keras3_bar_gives_progress_under_its_epoch_line() -> None:
    bar = "  58/469 ━━━━━━━━━━━━━━━━━━━━ 3s 7ms/step - loss: 0.41"
    progress, _ = fed(["Epoch 2/10", bar])
    assert progress.fraction == pytest.approx((1 + 58 / 469) / 10)


def test_a_per_epoch_bar_alone_is_no_fraction_rather_than_a_wrong_one() -> None:
    progress, _ = fed([keras2_bar(58, 469)])
    assert progress.fraction is None
    # Lightning's 0-based epoch with no total, and no --max_epochs in the command
    progress, _ = fed(["Epoch 3:  45%|████▌     | 20/50 [00:10<00:12, 4.1it/s, v_num=0]"])
    assert progress.fraction is None


def test_lightning_takes_its_total_from_the_command_and_its_epoch_is_0_based() -> None:
    lines = [f"Epoch {e}:  {4 * s}%|████▌     | {s}/25 [00:10<00:12, 4.1it/s, v_num=0]"
             for e in range(8) for s in (5, 20, 25)]
    lines.insert(4, "Validation: 0it [00:00, ?it/s]")
    lines.insert(5, "Validating:  50%|█████     | 1/2 [00:00<00:00, 30.1it/s]")
    for cmd in ("python train.py --max_epochs 8", "python train.py --trainer.max_epochs=8",
                "python train.py --epochs 8"):
        progress, seen = fed(lines, cmd)
        never_backwards(seen)
        assert seen[0] == pytest.approx((0 + 5 / 25) / 8)
        assert progress.fraction == 1.0
    _, seen = fed(["Epoch 3:  40%|████      | 20/50 [00:10<00:12, v_num=0, val_acc=0.634]"],
                  "python train.py --max_epochs 8")
    assert seen[-1] == pytest.approx((3 + 0.4) / 8)


def test_hf_evaluation_bars_between_training_bars_are_ignored() -> None:
    train = "{pct:>3}%|████      | {n}/1000 [00:10<00:12, 43.2it/s]"
    evaluation = "{pct:>3}%|██████████| {n}/8 [00:00<00:00, 30.12it/s]"
    lines = []
    for step in range(100, 1001, 100):
        lines.append(train.format(pct=step // 10, n=step))
        lines += [evaluation.format(pct=100 * n // 8, n=n) for n in (1, 4, 8)]
        lines.append("{'eval_loss': 0.4533, 'eval_accuracy': 0.645, 'epoch': 0.75}")
    for cmd in ("python run_glue.py --max_steps 1000", "python run_glue.py"):
        progress, seen = fed(lines, cmd)
        never_backwards(seen)
        assert seen[5] == pytest.approx(0.2) and seen[9] == pytest.approx(0.2)
        assert progress.fraction == 1.0 and progress.unit == "step"


def test_hf_epoch_in_its_dicts_over_num_train_epochs() -> None:
    progress, _ = fed(["{'loss': 0.0408, 'learning_rate': 3.6e-05, 'epoch': 1.5}"],
                      "python run.py --num_train_epochs 3")
    assert progress.fraction == pytest.approx(0.5) and progress.unit == "epoch"


def test_timm_epoch_is_0_based_of_its_epochs_option() -> None:
    lines = ["Train: 3 [   0/100 (  1%)]  Loss: 6.86 (6.86)  Time: 9.575s",
             "Train: 3 [  50/100 ( 50%)]  Loss: 6.77 (6.83)  Time: 0.320s",
             "Test: [  30/30]  Time: 3.856 (0.732)  Loss:   6.615 ( 6.691)  Acc@1:   0.000",
             "Train: 4 [   0/100 (  1%)]  Loss: 6.86 (6.86)  Time: 9.575s"]
    progress, seen = fed(lines, "./train.py /data --epochs 10")
    never_backwards(seen)
    assert seen[1] == pytest.approx(3.5 / 10)
    assert progress.fraction == pytest.approx(4 / 10)


def test_nanogpt_iter_of_max_iters() -> None:
    lines = ["iter 500: loss 1.2100, time 893.76ms, mfu 16.68%",
             "step 500: train loss 1.1900, val loss 1.3100",
             "iter 510: loss 1.2000, time 893.76ms, mfu 16.68%"]
    progress, seen = fed(lines, "python train.py config/train_shakespeare_char.py "
                                "--max_iters=5000")
    never_backwards(seen)
    assert progress.fraction == pytest.approx(510 / 5000) and progress.unit == "step"
    assert fed(lines)[0].fraction is None


def test_fairseq_epochs_are_1_based_of_max_epoch() -> None:
    lines = ["| epoch 003:  45%|████▌     | 45/100 [00:10<00:12, 4.1it/s, loss=4.2]",
             "2021-03-08 10:13:05 | INFO | train_inner | epoch 003:    100 / 100 loss=9.412",
             "| epoch 003 | valid on 'valid' subset | loss 9.2 | ppl 12.3 | num_updates 300",
             "| epoch 003 | loss 4.2 | ppl 18.4 | num_updates 300",
             "2021-03-08 10:14:17 | INFO | fairseq_cli.train | begin training epoch 4",
             "| epoch 004:  10%|█         | 10/100 [00:10<00:12, 4.1it/s, loss=4.2]"]
    progress, seen = fed(lines, "fairseq-train data-bin --max-epoch 8 --arch lstm")
    never_backwards(seen)
    assert seen[0] == pytest.approx(2.45 / 8) and seen[2] == pytest.approx(3 / 8)
    assert progress.fraction == pytest.approx(3.1 / 8)


def test_torchtune_epoch_of_its_epochs_override() -> None:
    lines = [f"1|{n}|Loss: 0.57:  {10 * n}%|█         | {n}/10 [00:02<00:18,  2.03s/it]"
             for n in (1, 5)] + ["2|11|Loss: 0.5:  10%|█         | 1/10 [00:02<00:18]"]
    progress, seen = fed(lines, "tune run full_finetune_single_device --config c.yaml epochs=3")
    never_backwards(seen)
    assert seen[1] == pytest.approx(0.5 / 3)
    assert progress.fraction == pytest.approx(1.1 / 3)


def test_progress_never_goes_backwards_in_any_stacks_real_log() -> None:
    logs = sorted(FIXTURES.glob("*.log"))
    assert logs
    for log in logs:
        lines = list(log_lines(log.read_bytes().decode("utf-8", errors="replace")))
        for cmd in ("", "train --epochs 400 --max_epochs 400 --max_iters 5000"):
            _, seen = fed(lines, cmd)
            never_backwards(seen)


def test_real_keras_logs_read_the_whole_job() -> None:
    # keras2_1: one end-of-epoch line per epoch, stopped after epoch 7 of 10
    keras2 = list(log_lines((FIXTURES / "keras2_1.log").read_text()))
    assert json.loads((FIXTURES / "keras2_1.json").read_text())["expect"]["progress"] == {
        "unit": "epoch", "total": 10}
    progress, _ = fed(keras2)
    assert progress.fraction == pytest.approx(0.7) and progress.total == 10
    # keras3_1: epoch 1 of 20, its bar at step 48 of 469
    keras3 = list(log_lines((FIXTURES / "keras3_1.log").read_bytes().decode()))
    progress, _ = fed(keras3)
    assert progress.fraction == pytest.approx(48 / 469 / 20)


def test_it_keeps_its_state_across_a_restart() -> None:
    progress, _ = fed(["Epoch 5/8", keras2_bar(58, 469)])
    again = JobProgress.from_json(json.loads(json.dumps(progress.to_json())))
    assert again.to_json() == progress.to_json()
    again.observe(keras2_bar(2, 469), 10.0)  # the bar started over: epoch 6
    assert again.fraction == pytest.approx((5 + 2 / 469) / 8) and again.at == 10.0
    assert JobProgress.from_json({"inner": "junk"}).fraction is None


def test_a_fraction_is_dated_by_when_it_was_first_seen() -> None:
    progress = JobProgress()
    progress.observe("epoch 2/10 loss=0.4", 20.0)
    progress.observe("epoch 2/10 loss=0.4", 25.0)  # the same line, seen again
    assert (progress.fraction, progress.at) == (0.2, 20.0)


def test_an_evaluation_bar_before_any_training_bar_is_not_the_runs() -> None:
    """HF evaluates before training (eval_on_start) and datasets' map bars run first: with the
    run's step total in the command, a bar of another total is none of the run's progress."""
    lines = ["Map: 100%|██████████| 5000/5000 [00:01<00:00, 3000.00 examples/s]",
             "100%|██████████| 8/8 [00:00<00:00, 30.12it/s]",
             " 10%|█         | 100/1000 [00:10<01:30, 10.0it/s]"]
    progress, seen = fed(lines, "python run_glue.py --max_steps 1000")
    assert seen == [None, None, pytest.approx(0.1)]
    assert progress.source == "step 100/1000 (--max_steps)"


def test_where_each_fraction_came_from_is_said() -> None:
    progress, _ = fed(["Train: 3 [  50/100 ( 50%)]  Loss: 6.77 (6.83)  Time: 0.320s"],
                      "./train.py --epochs 10")
    assert progress.source == "epoch 4/10 (of --epochs) + step 50/100"
    assert progress.done == pytest.approx(3.5)
    progress, _ = fed(["iter 510: loss 1.2000, time 893.76ms"], "train.py --max_iters=5000")
    assert progress.source == "step 510/5000 (--max_iters)"
    assert (progress.unit, progress.total) == ("step", 5000.0)
    progress, _ = fed(["iter 6000: loss 1.2000"], "train.py --max_iters=5000")
    assert progress.fraction == 1.0  # past the total: at its end, never more
    progress, _ = fed(["{'loss': 0.0408, 'epoch': 1.5}"], "run.py --num_train_epochs 3")
    assert progress.source == "epoch 1.5/3 (of --num_train_epochs)"
    progress, _ = fed(["progress: 42%"])
    assert (progress.fraction, progress.unit, progress.total, progress.done,
            progress.source) == (0.42, None, None, None, "42% done")
    # a percentage past the epochs: the fraction moves on, what it counts stays epochs
    progress, _ = fed(["Epoch 2/8", "progress: 50%"])
    assert (progress.fraction, progress.unit, progress.total, progress.done,
            progress.source) == (0.5, "epoch", 8.0, 4.0, "50% done")
    progress, _ = fed(["45%|████▌     | [00:10<00:12]"])
    assert (progress.fraction, progress.source) == (0.45, "bar 45%")
    progress, _ = fed([" 30%|███       | 300/1000 [00:10<01:30, 10.0it/s]"])
    assert (progress.source, progress.unit, progress.total) == ("step 300/1000 (bar)", "step",
                                                               1000.0)


def test_the_runs_totals_from_its_command() -> None:
    progress = JobProgress()
    progress.cmd_totals("train.py --max_steps 500 --max_epochs 0 --num_train_epochs 2.5")
    assert (progress.steps, progress.steps_from) == (500, "--max_steps")
    assert (progress.epochs, progress.epochs_from) == (2, "--num_train_epochs")
    progress.cmd_totals("train.py --max-epoch 4")  # a new command: its own totals
    assert (progress.epochs, progress.epochs_from) == (4, "--max-epoch")
    progress.cmd_totals("x" * 8200 + " --epochs 9")  # past what is read of a command
    assert progress.epochs == 4
    # a line's total is the run's: a command read after it does not change it
    progress, _ = fed(["Epoch 2/8"], "train.py --epochs 10")
    assert (progress.total, progress.source) == (8.0, "epoch 2/8")
    progress.cmd_totals("train.py --epochs 10")
    assert progress.epochs == 8
    progress.observe(keras2_bar(469, 469), 5.0)
    assert progress.fraction == pytest.approx(2 / 8)


def test_a_runs_bar_that_starts_over_was_an_epochs() -> None:
    bar = " {p:>2}%|█         | {n}/1000 [00:10<01:30, 10.0it/s]"
    progress, seen = fed([bar.format(p=10, n=100), bar.format(p=30, n=300),
                          bar.format(p=10, n=100)])
    assert seen == [0.1, 0.3, None] and progress.per_epoch and progress.main is None
    assert (progress.unit, progress.total, progress.source) == (None, None, "")
    # a smaller bar once the run's is known: an evaluation's
    progress, seen = fed([bar.format(p=30, n=300),
                          " 50%|█████     | 4/8 [00:00<00:00, 30.1it/s]"])
    assert seen == [0.3, 0.3] and progress.main == (300.0, 1000.0)
    # a larger one after a smaller: the smaller was an evaluation's, the run starts again
    progress, seen = fed([" 50%|█████     | 4/8 [00:00<00:00, 30.1it/s]",
                          bar.format(p=10, n=100)])
    assert seen == [0.5, 0.1] and progress.source == "step 100/1000 (bar)"


def test_an_epochs_summary_line_ends_that_epoch() -> None:
    progress, seen = fed(["Epoch 2/4", keras2_bar(100, 469),
                          "469/469 [==============================] - 9s 19ms/step - loss: 0.3 "
                          "- val_loss: 0.2", "Epoch 3/4"])
    never_backwards(seen)
    assert seen[1] == pytest.approx((1 + 100 / 469) / 4)
    assert progress.fraction == pytest.approx(2 / 4) and progress.epoch == 3
    assert progress.inner is None and not progress.ended


def test_the_state_kept_is_read_back_whole_and_junk_reads_as_nothing() -> None:
    progress, _ = fed([" 30%|███       | 300/1000 [00:10<01:30, 10.0it/s]"],
                      "run.py --max_steps 1000 --num_train_epochs 3")
    progress.ended, progress.epoch, progress.inner = True, 2, (3.0, 9.0)
    saved = json.loads(json.dumps(progress.to_json()))
    assert saved["main"] == [300.0, 1000.0] and saved["inner"] == [3.0, 9.0]
    again = JobProgress.from_json(saved)
    assert again.to_json() == progress.to_json()
    assert again.main == (300.0, 1000.0) and again.steps_from == "--max_steps"
    assert again.epochs_from == "--num_train_epochs" and again.ended and again.epoch == 2
    empty = JobProgress().to_json()
    assert JobProgress.from_json(None).to_json() == empty
    assert JobProgress.from_json({"epochs": "eight"}).to_json() == empty
    assert JobProgress.from_json({"fraction": [1]}).to_json() == empty
    partial = JobProgress.from_json({"fraction": 0.5, "main": [1, 2, 3], "unit": ""})
    assert (partial.fraction, partial.main, partial.unit, partial.at) == (0.5, None, None, None)


def test_nothing_seen_is_nothing_known() -> None:
    assert JobProgress().to_json() == {
        "fraction": None, "at": None, "unit": None, "total": None, "source": "",
        "epochs": None, "epochs_from": "", "steps": None, "steps_from": "", "epoch": None,
        "ended": False, "inner": None, "per_epoch": False, "main": None}


def test_the_state_kept_holds_lists_and_only_its_own_fields() -> None:
    progress, _ = fed([" 30%|███       | 300/1000 [00:10<01:30, 10.0it/s]"])
    progress.inner = (3.0, 9.0)
    data = progress.to_json()
    assert set(data) == set(JobProgress().to_json())
    assert data["inner"] == [3.0, 9.0] and data["main"] == [300.0, 1000.0]
    assert JobProgress.from_json({"fraction": 0.5}).source == ""


def test_a_command_total_of_one_counts_and_of_zero_does_not() -> None:
    progress = JobProgress()
    progress.cmd_totals("train.py --epochs 1 --max_steps 0")
    assert (progress.epochs, progress.steps, progress.steps_from) == (1, None, "")
    progress = JobProgress()
    progress.cmd_totals("train.py --max_epochs 0")
    assert (progress.epochs, progress.epochs_from) == (None, "")
    # a number cut off where the command stops being read is not read
    cut = "x" * (8192 - len(" --epochs ")) + " --epochs 9"
    progress.cmd_totals(cut)
    assert progress.epochs is None


def test_a_bar_under_an_epoch_line_is_that_epochs() -> None:
    progress, seen = fed(["Epoch 2/4", " 30%|███       | 300/1000 [00:10<01:30, 10.0it/s]"])
    assert seen[-1] == pytest.approx(1.3 / 4) and progress.per_epoch
    progress, _ = fed([keras2_bar(58, 469)])
    assert progress.per_epoch and progress.fraction is None


def test_a_bar_drawn_again_at_the_same_step_is_no_new_epoch() -> None:
    bar = " 30%|███       | 300/1000 [00:10<01:30, 10.0it/s]"
    progress, seen = fed([bar, bar])
    assert seen == [0.3, 0.3] and progress.at == 0.0 and not progress.per_epoch


def test_an_ended_epoch_is_said_and_a_new_one_starts_not_ended() -> None:
    progress, _ = fed(["epoch 2/4 loss=0.3"])
    assert (progress.fraction, progress.source) == (0.5, "epoch 2/4 done")
    # its bar starting over is the next epoch, not ended
    progress, _ = fed(["Epoch 2/4", keras2_bar(400, 469), "epoch 2/4 loss=0.3",
                       keras2_bar(10, 469)])
    assert progress.to_json()["ended"] is False and progress.epoch == 3
    # past the run's epochs it is at its end, never beyond
    progress, _ = fed(["epoch 9 loss=0.3"], "train.py --epochs 8")
    assert (progress.fraction, progress.source) == (1.0, "epoch 9/8 (of --epochs) done")


@pytest.mark.parametrize(("steps", "source"), [
    (30, "epoch 1/3 (of --epochs) + step 4/10"),  # a tie: the first read, the epoch's
    (100, "epoch 1/3 (of --epochs) + step 4/10"),  # the furthest
    (20, "step 4/20 (--max_steps)")])
def test_of_two_readings_of_one_line_the_furthest_counts(steps: int, source: str) -> None:
    line = "1|4|Loss: 2.0:  40%|████      | 4/10 [00:08<00:12,  2.00s/it]Step 4 | loss:2.0"
    progress, _ = fed([line], f"tune run full_finetune epochs=3 max_steps={steps}")
    assert progress.source == source
