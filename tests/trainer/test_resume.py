"""Where a run starts (trainer.resume), in this process: a new run's global batch, a resume that restores everything
its checkpoint holds and keeps its global batch on another number of ranks, rank 0's choice and rank 0's error on
every rank, and a checkpoint and history brought back from S3 (moto's server on 127.0.0.1).

The other ranks are played here by giving `distributed.broadcast_object` rank 0's value, as the collective would;
torchrun runs with real ranks are in test_training.py, test_resize.py and test_faults.py.
"""

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from eks_ddp.trainer import distributed
from eks_ddp.trainer.errors import CheckpointError
from eks_ddp.trainer.resume import Progress
from eks_ddp.trainer.training import Run
from tests.trainer.in_process import tiny_run, train_epochs
from tests.trainer.s3_server import BUCKET, endpoint, s3  # noqa: F401 (fixtures)

SHAPE = ("--synthetic-size", "12", "--epochs", "2", "--batch-size", "4")
"""12 samples, 2 epochs, 4 samples a rank's step: 3 steps an epoch on one rank."""


def _first_epoch(output: Path, *flags: str) -> Run:
    """A run that trained its first epoch and saved its checkpoint, as Run.execute does at an epoch's end."""
    run = tiny_run(output, *SHAPE, *flags)
    run.resume()
    run.config = replace(run.config, epochs=1)  # stop after one epoch
    train_epochs(run)
    run.save_checkpoint()
    return run


Sent = tuple[bytes | None, str | None]
"""What rank 0 broadcasts: its checkpoint's bytes, or its error."""


def _rank_zero_sends(monkeypatch: pytest.MonkeyPatch, value: Sent) -> list[Sent]:
    """The collective, seen from a rank that is not 0: rank 0's value arrives, whatever this rank had."""
    sent: list[Sent] = []
    monkeypatch.setattr(distributed, "broadcast_object", lambda mine: sent.append(mine) or value)
    return sent


@pytest.mark.parametrize(
    ("flags", "world", "global_batch"),
    [((), 1, 4), ((), 3, 12), (("--global-batch-size", "6"), 3, 6), (("--global-batch-size", "5"), 1, 5)],
)
def test_a_new_run_takes_its_global_batch_from_the_flag_or_from_every_rank_s_batch(
    tmp_path: Path, flags: tuple[str, ...], world: int, global_batch: int
) -> None:
    run = tiny_run(tmp_path, *SHAPE, *flags, topology=distributed.Topology(rank=0, world_size=world))
    assert run.resume() == 0
    assert run.progress == Progress(global_batch=global_batch)
    assert run.plan.global_batch == global_batch and run.plan.world_size == world
    assert run.scheduler.last_epoch == 0 and run.last_saved_step == -1


def test_a_resume_restores_all_its_checkpoint_holds_and_keeps_its_global_batch_on_more_ranks(tmp_path: Path) -> None:
    first = _first_epoch(tmp_path)
    saved_progress = first.progress
    assert saved_progress.step == 3 and saved_progress.epoch == 1, saved_progress

    second = tiny_run(tmp_path, *SHAPE, topology=distributed.Topology(rank=0, world_size=2))
    assert second.resume() == 3
    assert second.progress == saved_progress and second.progress is not saved_progress
    assert second.last_saved_step == 3, "the step just resumed from would be written again"
    assert second.plan.global_batch == 4, "on 2 ranks the run must keep the global batch it started with, not 2 x 4"
    assert second.sampler.steps_per_epoch == 3
    for name, tensor in first.model.state_dict().items():
        assert torch.equal(second.model.state_dict()[name], tensor), f"{name}: not the checkpoint's"
    for index, state in first.optimizer.state_dict()["state"].items():
        restored = second.optimizer.state_dict()["state"][index]
        assert all(torch.equal(restored[key], value) for key, value in state.items()), f"optimizer state {index}"
    assert second.scheduler.state_dict() == first.scheduler.state_dict()
    assert second.scheduler.get_last_lr() == first.scheduler.get_last_lr()


def test_a_resume_schedules_the_length_the_run_was_started_with(tmp_path: Path) -> None:
    """The schedule's length is the run's epochs times its steps an epoch at the kept global batch: the resumed
    run's next rate is the uninterrupted run's."""
    _first_epoch(tmp_path)
    uninterrupted = tiny_run(tmp_path / "other", *SHAPE)
    uninterrupted.resume()
    for _ in range(3):
        uninterrupted.optimizer.step()
        uninterrupted.scheduler.step()
    resumed = tiny_run(tmp_path, *SHAPE, topology=distributed.Topology(rank=0, world_size=2))
    resumed.resume()
    assert resumed.scheduler.lr_lambdas[0](4) == uninterrupted.scheduler.lr_lambdas[0](4)
    assert resumed.scheduler.get_last_lr() == uninterrupted.scheduler.get_last_lr()


def test_only_rank_0_reads_the_checkpoints_and_every_rank_resumes_from_its_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _first_epoch(tmp_path)
    rank_zero = tiny_run(tmp_path, *SHAPE, topology=distributed.Topology(rank=0, world_size=2))
    chosen: list[Sent] = []
    monkeypatch.setattr(distributed, "broadcast_object", lambda mine: chosen.append(mine) or mine)
    assert rank_zero.resume() == 3
    payload, error = chosen[0]
    assert payload is not None and error is None

    rank_one = tiny_run(tmp_path, *SHAPE, topology=distributed.Topology(rank=1, world_size=2))
    sent = _rank_zero_sends(monkeypatch, (payload, None))
    assert rank_one.resume() == 3 and rank_one.progress == rank_zero.progress
    assert sent == [(None, None)], "a rank other than 0 read the checkpoint directory itself"
    shares = [set(torch.cat(list(run.sampler.steps(1, 0)[0].micro_batches)).tolist()) for run in (rank_zero, rank_one)]
    assert not shares[0] & shares[1] and len(shares[0] | shares[1]) == 4, f"the ranks' shares of a step: {shares}"


def test_rank_0_s_checkpoint_error_stops_every_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _first_epoch(tmp_path)
    other_lr = tiny_run(tmp_path, *SHAPE, "--lr", "0.5")
    sent = _rank_zero_sends(monkeypatch, (None, "rank 0's reason"))
    with pytest.raises(CheckpointError, match="rank 0's reason"):
        other_lr.resume()
    assert len(sent) == 1 and sent[0][0] is None and "--lr 0.5 does not match" in str(sent[0][1]), (
        "rank 0 raised before telling the other ranks, which would wait for it in the broadcast"
    )


HISTORY = json.dumps({"step": 3, "loss": 1.0}) + "\n"


def test_a_new_pod_resumes_from_s3_and_brings_back_the_history(tmp_path: Path, s3: Any) -> None:
    """What the first pod uploaded (its checkpoint, its metrics.jsonl) is put in S3 here; the second pod's disk is
    empty."""
    first = _first_epoch(tmp_path / "first", "--run-name", "job")
    for path in first.checkpoints.paths(3):
        s3.upload_file(str(path), BUCKET, f"jobs/resumed/checkpoints/{path.name}")
    s3.put_object(Bucket=BUCKET, Key="jobs/resumed/metrics.jsonl", Body=HISTORY.encode())

    empty_disk = tmp_path / "second"
    second = tiny_run(empty_disk, *SHAPE, "--run-name", "job", "--artifact-uri", f"s3://{BUCKET}/jobs/resumed")
    assert second.resume() == 3 and second.progress == first.progress
    assert (empty_disk / "metrics.jsonl").read_text() == HISTORY


def test_history_without_a_checkpoint_to_resume_stays_in_s3(tmp_path: Path, s3: Any) -> None:
    """A run that starts at step 0 would rewrite metrics.jsonl from its own steps: the old one is not its history."""
    s3.put_object(Bucket=BUCKET, Key="jobs/fresh/metrics.jsonl", Body=HISTORY.encode())
    run = tiny_run(tmp_path, *SHAPE, "--run-name", "job", "--artifact-uri", f"s3://{BUCKET}/jobs/fresh")
    assert run.resume() == 0
    assert not (tmp_path / "metrics.jsonl").exists()
