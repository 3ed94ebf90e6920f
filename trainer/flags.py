"""The trainer's flags: each one's type, bounds and default, and the run's settings built from them.

A value out of bounds is refused by argparse in one line naming the flag, the value and what is allowed, before
anything is read or written; a count is refused at 0 unless 0 means something (tests/trainer/test_bad_input.py).
"""

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eks_ddp.trainer import datasets, distributed, models, precision
from eks_ddp.trainer.config import TrainConfig
from eks_ddp.trainer.errors import OneLineParser
from eks_ddp.trainer.sources import SOURCES


@dataclass(frozen=True)
class Bounded:
    """A number type for argparse that refuses values outside its bounds, saying what is allowed."""

    kind: Callable[[str], float]
    minimum: float
    exclusive: bool = False
    maximum: float | None = None

    @property
    def allowed(self) -> str:
        lower = f"{'>' if self.exclusive else '>='} {self.minimum:g}"
        return lower + (f" and < {self.maximum:g}" if self.maximum is not None else "")

    def __call__(self, text: str) -> float:
        try:
            value = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        too_small = value <= self.minimum if self.exclusive else value < self.minimum
        if too_small or (self.maximum is not None and value >= self.maximum):
            raise argparse.ArgumentTypeError(f"{text} is not allowed (must be {self.allowed})")
        return value


def shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not CxHxW with positive integers (for example 3x32x32)")
    channels, height, width = (int(part) for part in parts)
    return channels, height, width


Flag = tuple[str, dict[str, Any]]
"""A flag and its settings: `add_argument`'s keywords."""

TRAIN_FLAGS: tuple[Flag, ...] = (
    ("--dataset", dict(
        choices=datasets.DATASETS, default="digits",
        help="digits is bundled; mnist and cifar10 need --data-dir; synthetic is generated",
    )),
    ("--data-dir", dict(type=Path, help="directory prepared by `prepare-data` (mnist, cifar10)")),
    ("--model", dict(choices=("auto", *models.MODELS), default="auto", help="auto: the dataset's default model")),
    ("--epochs", dict(type=Bounded(int, 1), default=10, help="passes over the training set")),
    ("--batch-size", dict(
        type=Bounded(int, 1), default=64,
        help="samples a rank trains on per step; with --global-batch-size, the largest micro-batch per rank",
    )),
    ("--global-batch-size", dict(
        type=Bounded(int, 1),
        help="samples per optimizer step over all ranks, kept across resizes by gradient accumulation "
        "(default: --batch-size times the number of ranks the run starts with)",
    )),
    ("--lr", dict(type=Bounded(float, 0, exclusive=True), default=3e-3, help="peak AdamW learning rate")),
    ("--weight-decay", dict(type=Bounded(float, 0), default=0.01, help="AdamW weight decay")),
    ("--warmup-fraction", dict(
        type=Bounded(float, 0, maximum=1), default=0.05, help="share of steps with linear LR warm-up"
    )),
    ("--seed", dict(type=int, default=0, help="the initial weights, the data order, synthetic data")),
    ("--precision", dict(
        choices=precision.PRECISIONS, default="auto", help="auto: bf16 where the hardware does it natively"
    )),
    ("--device", dict(
        choices=distributed.DEVICES, default="auto",
        help="auto: CUDA when there is a GPU; cuda: stop when there is none (GPU pods pass it)",
    )),
    ("--output-dir", dict(
        type=Path, default=Path("runs/train"), help="the model, curves, summary, metrics and events"
    )),
    ("--checkpoint-dir", dict(type=Path, help="default: OUTPUT_DIR/checkpoints; share it between restarts")),
    ("--artifact-uri", dict(
        help="s3://BUCKET/PREFIX: upload the model and summary there at the end, the checkpoints, metrics, "
        "TensorBoard events and curves at every checkpoint; resume from the newest verified checkpoint there "
        "when none newer is local (and get the run's metrics and events back first)",
    )),
    ("--checkpoint-uri", dict(help="s3://BUCKET/PREFIX for the checkpoints (default: ARTIFACT_URI/checkpoints)")),
    ("--run-name", dict(
        help="recorded in checkpoints, the summary and the model (default: the output directory's absolute path)",
    )),
    ("--checkpoint-every", dict(
        type=Bounded(int, 0), default=50, help="steps between checkpoints; 0: epoch ends only"
    )),
    ("--keep-checkpoints", dict(
        type=Bounded(int, 1), default=3, help="newest checkpoints kept, locally and in S3; older ones are deleted"
    )),
    ("--log-every", dict(type=Bounded(int, 1), default=10, help="steps between metrics lines")),
    ("--metrics-port", dict(
        type=Bounded(int, 0, maximum=65536), default=0,
        help="each node's first process (local rank 0) serves Prometheus metrics on this port (the stack's training "
        "pods declare one); 0: off",
    )),
    ("--metrics-address", dict(default="0.0.0.0", help="the address the metrics port listens on")),
    ("--compile", dict(action="store_true", help="torch.compile the model (slow start, faster steps)")),
    ("--timeout-minutes", dict(type=Bounded(float, 0, exclusive=True), default=30.0, help="collective timeout")),
    ("--synthetic-shape", dict(
        type=shape, default=(3, 32, 32), metavar="CxHxW", help="images of --dataset synthetic"
    )),
    ("--synthetic-size", dict(type=Bounded(int, 1), default=8192, help="training images of --dataset synthetic")),
    ("--synthetic-classes", dict(type=Bounded(int, 2), default=10, help="classes of --dataset synthetic")),
)

EVALUATE_FLAGS: tuple[Flag, ...] = (
    ("--model-file", dict(type=Path, required=True, help="model.pt that `train` wrote")),
    ("--run-name", dict(help="refuse a model that another run wrote (the name training was given)")),
    ("--model-uri", dict(
        help="s3://BUCKET/KEY of model.pt: downloaded to --model-file first, and the report uploaded next to it",
    )),
    ("--wait-minutes", dict(
        type=Bounded(float, 0), default=0.0, help="with --model-uri: wait this long for the model"
    )),
    ("--dataset", dict(choices=datasets.DATASETS, help="default: the dataset the model was trained on")),
    ("--data-dir", dict(type=Path, help="directory prepared by `prepare-data` (mnist, cifar10)")),
    ("--json", dict(type=Path, help="also write the report as JSON here")),
    ("--confusion-matrix", dict(type=Path, help="PNG path (default: next to the model file)")),
    ("--batch-size", dict(type=Bounded(int, 1), default=1024, help="test images per forward pass")),
)

PREPARE_DATA_FLAGS: tuple[Flag, ...] = (
    ("--dataset", dict(choices=tuple(SOURCES), required=True, help="the dataset to download")),
    ("--data-dir", dict(type=Path, required=True, help="where to put it: train's --data-dir")),
    ("--source", dict(help="mirror base URL, or the archive's own (e.g. presigned) URL for cifar10")),
)

COMMANDS: tuple[tuple[str, str, tuple[Flag, ...]], ...] = (
    ("train", "train a model with DDP (under torchrun) or in one process", TRAIN_FLAGS),
    ("evaluate", "overall and per-class accuracy of a saved model, and a confusion matrix", EVALUATE_FLAGS),
    ("prepare-data", "download and verify the official MNIST or CIFAR-10 files", PREPARE_DATA_FLAGS),
)
"""Each command, its one-line help and its flags, in the order --help and the reference list them."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m eks_ddp.trainer", description="The eks-ddp PyTorch DDP trainer.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for name, summary, flags in COMMANDS:
        command = commands.add_parser(name, help=summary)
        for flag, settings in flags:
            command.add_argument(flag, **settings)
    return parser


def train_config(args: argparse.Namespace) -> TrainConfig:
    channels, height, width = args.synthetic_shape
    return TrainConfig(
        dataset=args.dataset,
        data_dir=args.data_dir,
        model=args.model,
        epochs=args.epochs,
        batch_size=args.batch_size,
        global_batch_size=args.global_batch_size,
        lr=args.lr,
        weight_decay=args.weight_decay,
        warmup_fraction=args.warmup_fraction,
        seed=args.seed,
        precision=args.precision,
        device=args.device,
        output_dir=args.output_dir,
        run_name=args.run_name or str(args.output_dir.resolve()),
        checkpoint_dir=args.checkpoint_dir or args.output_dir / "checkpoints",
        artifact_uri=args.artifact_uri,
        checkpoint_uri=args.checkpoint_uri,
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        log_every=args.log_every,
        metrics_port=args.metrics_port,
        metrics_address=args.metrics_address,
        compile=args.compile,
        timeout_minutes=args.timeout_minutes,
        synthetic=datasets.SyntheticShape(channels, height, width, args.synthetic_size, args.synthetic_classes),
    )


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return "x".join(map(str, value))  # --synthetic-shape
    return "" if value is None else f"`{value}`"


def _allowed(action: argparse.Action) -> str:
    if action.choices is not None:
        return ", ".join(f"`{choice}`" for choice in action.choices)
    if isinstance(action.type, Bounded):
        return action.type.allowed
    return {shape: "CxHxW, each > 0", Path: "a path", int: "a whole number", None: ""}[action.type]


def reference() -> str:
    """Every command's flags as Markdown tables: docs/trainer.md's reference, kept equal to this by
    tests/trainer/test_flags.py; `python -m eks_ddp.trainer.flags` prints it."""
    (commands,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    sections = []
    for (name, command), listed in zip(commands.choices.items(), commands._choices_actions):
        rows = [f"`{name}`: {listed.help}", "", "| flag | default | allowed | |",
                "| --- | --- | --- | --- |"]
        for action in command._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            default = "required" if action.required else "off" if action.const is True else _shown(action.default)
            flag = " ".join([action.option_strings[0], *([str(action.metavar)] if action.metavar else [])])
            rows.append(f"| `{flag}` | {default} | {_allowed(action)} | {action.help} |")
        sections.append("\n".join(rows))
    return "\n\n".join(sections) + "\n"


if __name__ == "__main__":
    print(reference(), end="")
