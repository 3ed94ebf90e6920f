"""Exact DDP, one step at a time: the gradient a step applies (DDP's all-reduce takes the mean of the ranks') is the
gradient of the mean loss over the step's samples computed in one process, on a whole step and on an epoch's short
last step, whatever the ranks' shares of it and their micro-batches.

Compared as gradients: AdamW's update hardly changes when a whole step's gradient is scaled, and near the cosine
schedule's end the LR is about 0, so the parameters after a run hide a step weighted wrongly."""

import copy
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from eks_ddp.trainer.distributed import Topology
from tests.trainer.in_process import tiny_run, train_epochs

SIZE = 11
"""In global batches of 4: two whole steps, then a short one of 3 samples."""


@pytest.mark.parametrize(
    ("world", "batch_size"),
    [
        pytest.param(1, 2, id="1 rank, 2 micro-batches of 2 (the short step: 2 and 1)"),
        pytest.param(1, 1, id="1 rank, 4 micro-batches of 1"),
        pytest.param(2, 2, id="2 ranks of 2 (the short step: 2 and 1)"),
        pytest.param(2, 1, id="2 ranks, 2 micro-batches of 1 each"),
        pytest.param(4, 1, id="4 ranks of 1 (the short step: one rank has none)"),
    ],
)
@pytest.mark.parametrize("short", [False, True], ids=["whole step", "short last step"])
def test_a_step_applies_the_gradient_of_its_mean_loss(tmp_path: Path, world: int, batch_size: int, short: bool) -> None:
    flags = ("--synthetic-size", str(SIZE), "--global-batch-size", "4", "--batch-size", str(batch_size))
    ranks = []
    for rank in range(world):  # each rank as its own run: the same model, its own share of each step
        topology = Topology(rank=rank, local_rank=rank, world_size=world, local_world_size=world)
        run = tiny_run(tmp_path, *flags, topology=topology)
        run.resume()
        if short:
            run.progress.position = run.sampler.whole_steps_end
        ranks.append(run)
    first = ranks[0]
    shares = (run.sampler.steps(0, run.progress.position)[0].micro_batches for run in ranks)
    samples = torch.cat([batch for share in shares for batch in share])
    assert len(samples) == (SIZE % 4 if short else 4), "the ranks' shares of the step are not all of its samples"
    reference = copy.deepcopy(first.model)
    F.cross_entropy(reference(first.train_x[samples]), first.train_y[samples]).backward()

    applied: list[list[torch.Tensor]] = []  # each rank's gradient at its first optimizer step
    for run in ranks:
        gradients: list[list[torch.Tensor]] = []
        run.optimizer.register_step_pre_hook(
            lambda optimizer, args, kwargs, gradients=gradients, run=run: gradients.append(
                [parameter.grad.clone() for parameter in run.model.parameters()]  # type: ignore[union-attr]
            )
        )
        train_epochs(run)
        applied.append(gradients[0])
    names = [name for name, _ in reference.named_parameters()]
    expected = [parameter.grad for parameter in reference.parameters()]
    for name, single_process, *per_rank in zip(names, expected, *applied, strict=True):
        mean = torch.stack(per_rank).mean(0)  # what DDP's all-reduce gives every rank
        torch.testing.assert_close(
            mean,
            single_process,
            msg=lambda detail, name=name: f"{name}: not the one-process gradient ({' '.join(detail.split())})",
        )
