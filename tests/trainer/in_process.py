"""A tiny `train` run in the test's own process: milliseconds a run, and the loop's optimizer open to look at."""

from pathlib import Path

from eks_ddp.trainer.flags import build_parser, train_config
from eks_ddp.trainer.distributed import StopVote, Topology
from eks_ddp.trainer.interrupt import StopSignals
from eks_ddp.trainer.training import Run

TINY = ("--dataset", "synthetic", "--synthetic-shape", "1x4x4", "--synthetic-classes", "3", "--model", "mlp",
        "--precision", "fp32", "--device", "cpu", "--epochs", "1", "--checkpoint-every", "0", "--log-every", "1000")
"""Flags of a run small enough for a test; a test's own flags come after them and win."""


def tiny_run(output: Path, *flags: str, topology: Topology = Topology()) -> Run:
    """A run built from the command line a user would type, as rank `topology.rank` of `topology.world_size`
    (no process group: a test plays the other ranks itself)."""
    args = build_parser().parse_args(["train", *TINY, "--output-dir", str(output), *flags])
    return Run(train_config(args), topology)


def train_epochs(run: Run) -> None:
    """The rest of the run's epochs (after `run.resume()`) as `Run.execute` trains them, without the outputs no test
    here reads (TensorBoard, the curves and the model cost seconds)."""
    with StopSignals() as stop:
        while run.progress.epoch < run.config.epochs:
            run._train_epoch(run.model, stop, StopVote())
            run._finish_epoch()
