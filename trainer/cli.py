"""Command line: `python -m eks_ddp.trainer {train,evaluate,prepare-data} ...`.

Bad input ends with one line on stderr that names the flag or file, and a
non-zero exit: 2 for input a retry cannot fix, RETRYABLE_EXIT_CODE after a
SIGTERM checkpoint, 1 for a failed download or an unusable checkpoint.
"""

import argparse
import logging
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from eks_ddp.trainer import flags, outputs, startup
from eks_ddp.trainer.distributed import Topology
from eks_ddp.trainer.errors import USAGE_EXIT_CODE, CheckpointError, DownloadError, PeerLost, UsageError
from eks_ddp.trainer.interrupt import RETRYABLE_EXIT_CODE, TerminationRequested
from eks_ddp.trainer.sources import SOURCES


def _run_train(args: argparse.Namespace, topology: Topology) -> None:
    # Only when training, and frozen: the loop's imports and torch._dynamo, which AdamW's first call would import
    # unfrozen (0.6 CPU-seconds more per rank).
    with startup.frozen_imports():
        import torch._dynamo  # noqa: F401

        from eks_ddp.trainer.training import train

    startup.reuse_freed_memory()
    summary = train(flags.train_config(args), topology)
    if topology.is_main:
        out = args.output_dir
        print(
            f"test accuracy {summary['test_accuracy']:.4f} after {summary['epochs']} epochs on "
            f"{summary['world_size']} rank(s), {summary['images_per_second']:.0f} images/s, {summary['wall_seconds']:.1f} s"
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
    args = flags.build_parser().parse_args(argv)
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
