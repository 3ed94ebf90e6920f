"""Command line: `python -m eks_ddp.trainer {train,evaluate,prepare-data} ...`.

Bad input ends with one line on stderr that names the flag or file, and a
non-zero exit: 2 for input a retry cannot fix, RETRYABLE_EXIT_CODE after a
SIGTERM checkpoint, 1 for a failed download or an unusable checkpoint.
"""

import argparse
import logging
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from eks_ddp.trainer import datasets, distributed, models, outputs, precision, startup
from eks_ddp.trainer.config import TrainConfig
from eks_ddp.trainer.distributed import Topology
from eks_ddp.trainer.errors import (
    USAGE_EXIT_CODE,
    CheckpointError,
    DownloadError,
    OneLineParser,
    PeerLost,
    UsageError,
)
from eks_ddp.trainer.interrupt import RETRYABLE_EXIT_CODE, TerminationRequested
from eks_ddp.trainer.sources import SOURCES


def _bounded(kind: Callable[[str], float], minimum: float, *, exclusive: bool = False, maximum: float | None = None):
    allowed = f"{'>' if exclusive else '>='} {minimum:g}" + (f" and < {maximum:g}" if maximum is not None else "")

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        too_small = value <= minimum if exclusive else value < minimum
        if too_small or (maximum is not None and value >= maximum):
            raise argparse.ArgumentTypeError(f"{text} is not allowed (must be {allowed})")
        return value

    return parse


def _shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not CxHxW with positive integers (for example 3x32x32)")
    channels, height, width = (int(part) for part in parts)
    return channels, height, width


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m eks_ddp.trainer", description="The eks-ddp PyTorch DDP trainer.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    train = commands.add_parser("train", help="train a model with DDP (under torchrun) or in one process")
    train.add_argument("--dataset", choices=datasets.DATASETS, default="digits", help="digits needs no files (default)")
    train.add_argument("--data-dir", type=Path, help="directory prepared by `prepare-data` (mnist, cifar10)")
    train.add_argument(
        "--model", choices=("auto", *models.MODELS), default="auto", help="auto: the dataset's default model"
    )
    train.add_argument("--epochs", type=_bounded(int, 1), default=10)
    train.add_argument(
        "--batch-size",
        type=_bounded(int, 1),
        default=64,
        help="per rank (default 64); with --global-batch-size, the largest micro-batch per rank",
    )
    train.add_argument(
        "--global-batch-size",
        type=_bounded(int, 1),
        help="samples per optimizer step over all ranks, kept across resizes by gradient accumulation "
        "(default: --batch-size times the number of ranks the run starts with)",
    )
    train.add_argument("--lr", type=_bounded(float, 0, exclusive=True), default=3e-3, help="peak AdamW learning rate")
    train.add_argument("--weight-decay", type=_bounded(float, 0), default=0.01)
    train.add_argument(
        "--warmup-fraction",
        type=_bounded(float, 0, maximum=1),
        default=0.05,
        help="share of steps with linear LR warm-up",
    )
    train.add_argument("--seed", type=int, default=0)
    train.add_argument(
        "--precision",
        choices=precision.PRECISIONS,
        default="auto",
        help="auto: bf16 where the hardware does it natively",
    )
    train.add_argument(
        "--device",
        choices=distributed.DEVICES,
        default="auto",
        help="auto: CUDA when there is a GPU; cuda: stop when there is none (GPU pods pass it)",
    )
    train.add_argument("--output-dir", type=Path, default=Path("runs/train"))
    train.add_argument("--checkpoint-dir", type=Path, help="default: OUTPUT_DIR/checkpoints; share it between restarts")
    train.add_argument(
        "--artifact-uri",
        help="s3://BUCKET/PREFIX: upload the model and summary there at the end, the checkpoints, metrics, "
        "TensorBoard events and curves at every checkpoint; resume from the newest verified checkpoint there "
        "when none newer is local (and get the run's metrics and events back first)",
    )
    train.add_argument(
        "--checkpoint-uri", help="s3://BUCKET/PREFIX for the checkpoints (default: ARTIFACT_URI/checkpoints)"
    )
    train.add_argument(
        "--run-name",
        help="recorded in checkpoints, the summary and the model (default: the output directory's absolute path)",
    )
    train.add_argument(
        "--checkpoint-every", type=_bounded(int, 0), default=50, help="steps between checkpoints; 0: epoch ends only"
    )
    train.add_argument(
        "--keep-checkpoints",
        type=_bounded(int, 1),
        default=3,
        help="newest checkpoints kept, locally and in S3; older ones are deleted",
    )
    train.add_argument("--log-every", type=_bounded(int, 1), default=10, help="steps between metrics lines")
    train.add_argument(
        "--metrics-port",
        type=_bounded(int, 0, maximum=65536),
        default=0,
        help="each node's first process (local rank 0) serves Prometheus metrics on this port (the stack's training "
        "pods declare one); 0: off",
    )
    train.add_argument("--metrics-address", default="0.0.0.0", help="the address the metrics port listens on")
    train.add_argument("--compile", action="store_true", help="torch.compile the model (slow start, faster steps)")
    train.add_argument(
        "--timeout-minutes", type=_bounded(float, 0, exclusive=True), default=30.0, help="collective timeout"
    )
    train.add_argument("--synthetic-shape", type=_shape, default=(3, 32, 32), metavar="CxHxW")
    train.add_argument(
        "--synthetic-size", type=_bounded(int, 1), default=8192, help="training images of --dataset synthetic"
    )
    train.add_argument("--synthetic-classes", type=_bounded(int, 2), default=10)

    evaluate = commands.add_parser(
        "evaluate", help="overall and per-class accuracy of a saved model, and a confusion matrix"
    )
    evaluate.add_argument("--model-file", type=Path, required=True)
    evaluate.add_argument("--run-name", help="refuse a model that another run wrote (the name training was given)")
    evaluate.add_argument(
        "--model-uri",
        help="s3://BUCKET/KEY of model.pt: downloaded to --model-file first, and the report uploaded next to it",
    )
    evaluate.add_argument(
        "--wait-minutes", type=_bounded(float, 0), default=0.0, help="with --model-uri: wait this long for the model"
    )
    evaluate.add_argument("--dataset", choices=datasets.DATASETS, help="default: the dataset the model was trained on")
    evaluate.add_argument("--data-dir", type=Path)
    evaluate.add_argument("--json", type=Path, help="also write the report as JSON here")
    evaluate.add_argument("--confusion-matrix", type=Path, help="PNG path (default: next to the model file)")
    evaluate.add_argument("--batch-size", type=_bounded(int, 1), default=1024)

    prepare = commands.add_parser("prepare-data", help="download and verify the official MNIST or CIFAR-10 files")
    prepare.add_argument("--dataset", choices=tuple(SOURCES), required=True)
    prepare.add_argument("--data-dir", type=Path, required=True)
    prepare.add_argument("--source", help="mirror base URL, or the archive's own (e.g. presigned) URL for cifar10")
    return parser


def _train_config(args: argparse.Namespace) -> TrainConfig:
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


def _run_train(args: argparse.Namespace, topology: Topology) -> None:
    # Only when training, and frozen: the loop's imports and torch._dynamo, which AdamW's first call would import
    # unfrozen (0.6 CPU-seconds more per rank).
    with startup.frozen_imports():
        import torch._dynamo  # noqa: F401

        from eks_ddp.trainer.training import train

    startup.reuse_freed_memory()
    summary = train(_train_config(args), topology)
    if topology.is_main:
        out = args.output_dir
        print(
            f"test accuracy {summary['test_accuracy']:.4f} after {summary['epochs']} epochs on {summary['world_size']} rank(s), "
            f"{summary['images_per_second']:.0f} images/s, {summary['wall_seconds']:.1f} s"
        )
        print(f"model:   {out / 'model.pt'}")
        print(f"curves:  {out / 'training-curves.png'}")
        print(f"summary: {out / 'summary.json'}")
        print(f"tensorboard: {tensorboard_command()} --logdir {out / outputs.TENSORBOARD_DIR}")


def tensorboard_command() -> str:
    """TensorBoard of the environment the trainer runs in: its script beside this interpreter (a virtual environment's
    bin/, which a user's shell may not have on PATH), else the interpreter running its module."""
    script = Path(sys.executable).parent / "tensorboard"
    return shlex.quote(str(script)) if script.exists() else f"{shlex.quote(sys.executable)} -m tensorboard.main"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    prefix = ""
    try:
        topology = Topology.from_environ()
        prefix = f"[rank {topology.rank}] " if topology.world_size > 1 else ""
        logging.basicConfig(
            level=logging.INFO if topology.is_main else logging.WARNING,
            format=f"%(asctime)s {prefix}%(message)s",
            datefmt="%H:%M:%S",
            stream=sys.stderr,
        )
        if args.command == "train":
            _run_train(args, topology)
        elif args.command == "evaluate":
            from eks_ddp.trainer import (
                artifacts,  # boto3, only for evaluate (prepare-data starts without it)
            )
            from eks_ddp.trainer.evaluation import evaluate_command

            if args.model_uri:
                artifacts.fetch(args.model_uri, args.model_file, args.wait_minutes)
            evaluate_command(
                args.model_file,
                args.dataset,
                args.data_dir,
                args.json,
                args.confusion_matrix,
                args.batch_size,
                args.run_name,
            )
            if args.model_uri:  # the report lasts with the model, not with this pod's scratch space
                folder = args.model_uri.rsplit("/", 1)[0]
                matrix = args.confusion_matrix or args.model_file.with_name("confusion-matrix.png")
                for path in (matrix, *([args.json] if args.json else [])):
                    artifacts.put(path, f"{folder}/{path.name}")
        else:
            from eks_ddp.trainer.prepare import prepare

            for line in prepare(SOURCES[args.dataset], args.data_dir, args.source):
                print(line)
    except UsageError as error:
        print(f"{prefix}error: {error}", file=sys.stderr)
        return USAGE_EXIT_CODE
    except (CheckpointError, DownloadError) as error:
        print(f"{prefix}error: {error}", file=sys.stderr)
        return 1
    except PeerLost as error:
        print(f"{prefix}error: {error}", file=sys.stderr)
        return RETRYABLE_EXIT_CODE
    except TerminationRequested as stop:
        print(f"{prefix}{stop}; exiting with {RETRYABLE_EXIT_CODE} so the job is retried", file=sys.stderr)
        return RETRYABLE_EXIT_CODE
    return 0
