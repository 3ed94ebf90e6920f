"""The LR schedule spans exactly the optimizer steps a run takes, an epoch's short last step included: warm-up from
the first step, cosine decay to its floor as the last step ends and not before (a step trained at LR 0 is lost)."""

import math
from pathlib import Path

import pytest

from eks_ddp.trainer.sampling import GlobalBatchSampler, plan_batches
from eks_ddp.trainer.schedule import warmup_cosine
from tests.trainer.in_process import tiny_run, train_epochs


@pytest.mark.parametrize(
    ("size", "global_batch", "steps"),
    [(10, 4, 3), (11, 4, 3), (12, 4, 3), (13, 4, 4), (3, 4, 1), (7, 1, 7)],
)
def test_an_epoch_takes_as_many_steps_as_the_run_counts(size: int, global_batch: int, steps: int) -> None:
    """`steps`: the whole global batches in `size` samples, plus one for a remainder."""
    sampler = GlobalBatchSampler(size, plan_batches(global_batch, 1, global_batch), 0, seed=0)
    taken = sampler.steps(epoch=0, position=0)
    assert sum(step.samples for step in taken) == size
    assert len(taken) == steps, f"the sampler yields {len(taken)} steps"
    assert sampler.steps_per_epoch == steps, f"the run counts {sampler.steps_per_epoch} steps an epoch, takes {steps}"


EPOCHS, LR, WARMUP_FRACTION = 4, 0.1, 0.2
STEPS = EPOCHS * 3
"""10 samples in global batches of 4: two whole steps and a short one of 2 samples an epoch."""


def test_the_learning_rate_reaches_its_floor_as_the_last_step_ends(tmp_path: Path) -> None:
    run = tiny_run(tmp_path, "--synthetic-size", "10", "--global-batch-size", "4", "--epochs", str(EPOCHS),
                   "--lr", str(LR), "--warmup-fraction", str(WARMUP_FRACTION))
    used: list[float] = []  # the LR each optimizer step trains with
    run.optimizer.register_step_pre_hook(lambda optimizer, args, kwargs: used.append(optimizer.param_groups[0]["lr"]))
    run.resume()
    train_epochs(run)
    assert len(used) == STEPS, f"the run took {len(used)} optimizer steps"
    assert used[-1] > 0, f"the schedule reached its floor before the run's end: {used}"
    assert run.scheduler.get_last_lr() == [0.0], "the schedule did not reach its floor as the last step ended"
    warmup = int(STEPS * WARMUP_FRACTION)  # 2 steps rising to the peak, then cosine over the other 10
    expected = [LR * (step + 1) / warmup for step in range(warmup)] + [
        LR * (1 + math.cos(math.pi * (step - warmup) / (STEPS - warmup))) / 2 for step in range(warmup, STEPS)
    ]
    assert used == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("warmup_fraction", [0.0, 0.1])
def test_a_warm_up_of_at_most_one_step_trains_the_first_step_at_the_peak(warmup_fraction: float) -> None:
    assert warmup_cosine(10, warmup_fraction)(0) == 1.0


def test_a_run_of_two_steps_reaches_its_floor_as_the_last_step_ends() -> None:
    """One warm-up step, then a decay that spans the single step left."""
    multiplier = warmup_cosine(2, 0.0)
    assert [multiplier(step) for step in range(3)] == [1.0, 1.0, 0.0]


def test_past_its_last_step_the_schedule_stays_at_its_floor() -> None:
    """No step of a run gets there (--epochs defines the run), but a scheduler used elsewhere may: it must not climb
    back up the cosine."""
    multiplier = warmup_cosine(10, 0.2)
    assert [multiplier(step) for step in (10, 15, 18, 25)] == [0.0] * 4
