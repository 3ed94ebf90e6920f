"""The bundled trainer against a baseline, run in turn (A B A B ...) on the same data, compared pair by pair.

A shared machine's speed drifts between runs (one-after-the-other timings here differed by 2x in a day), so each
pair runs the two sides back to back and the report gives every pair's ratio and the medians. Per run: the whole
process (torchrun and its ranks, from launch to exit), the time per epoch once training started, images per second,
CPU seconds (user + system, every process), and the peak memory of one process (the largest rank's resident set).

The baseline is the AWS workshop's own `cifar10-model-train.py` when `--baseline` names its folder
(aws-samples/aws-distributed-training-workshop-eks, `3-build-container/`: the script runs there, unchanged, with its
`cnn_model.py` and `utils.py`), and otherwise this project's workshop-style loop (`benchmarks/workshop_baseline.py`),
labelled as such. Both read the same CIFAR-10 python batches, written here with random pixels and labels: the
speed of a step does not depend on what the pixels show. `python -m benchmarks.paired --help`, or `make bench`.
"""

import argparse
import json
import os
import pickle
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eks_ddp.trainer import precision
from eks_ddp.workloads.training_pod import TRAINER_MODULE

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
REPOSITORY = Path(__file__).resolve().parent.parent
WORKSHOP_SCRIPT = "cifar10-model-train.py"
# What the workshop's script prints just before its training loop, and after each epoch (rank 0).
WORKSHOP_STARTED, WORKSHOP_EPOCH_DONE = "Running on processor type", "=> saved checkpoint for epoch"
# oneDNN's, ATen's and MKL's own switches for the instruction sets they may use.
AVX2_ENVIRONMENT = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


@dataclass(frozen=True)
class Run:
    process_seconds: float
    """Launch to exit of torchrun and its ranks."""
    epoch_seconds: float
    """Training time per epoch, once the ranks have started training."""
    images_per_second: float
    cpu_seconds: float
    """User and system time of torchrun and every rank."""
    peak_mib: float
    """The largest resident set of any one process (a rank)."""
    precision: str = "fp32"
    """What the steps ran in (the baselines: fp32)."""


def write_cifar_batches(directory: Path, train_images: int, test_images: int, seed: int = 0) -> Path:
    """CIFAR-10's python batches (five training files and `test_batch`) with random content."""
    rng = np.random.default_rng(seed)
    batches = directory / "cifar-10-batches-py"
    batches.mkdir(parents=True, exist_ok=True)
    sizes = [train_images // 5 + (index < train_images % 5) for index in range(5)]
    for name, count in [*((f"data_batch_{i + 1}", size) for i, size in enumerate(sizes)), ("test_batch", test_images)]:
        data = rng.integers(0, 256, (count, 3 * 32 * 32), dtype=np.uint8)
        batch = {b"data": data, b"labels": rng.integers(0, 10, count).tolist()}
        (batches / name).write_bytes(pickle.dumps(batch))
    return batches


def measured(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float, list[tuple[float, str]]]:
    """Run `command`; its wall seconds, CPU seconds and peak resident MiB (from wait4, which counts the processes
    it waited for: torchrun's ranks), and its output lines with the second each arrived."""
    env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}  # lines arrive as printed: their arrival times are the clock
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append((time.perf_counter() - started, line.rstrip()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    reader.join(timeout=10)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        tail = "\n".join(line for _, line in lines[-30:])
        raise SystemExit(f"{' '.join(command[:6])} ... failed ({process.returncode}):\n{tail}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, lines


def torchrun(nproc: int) -> list[str]:
    return [TORCHRUN, "--standalone", "--nproc-per-node", str(nproc)]


def cpu_environment(args: argparse.Namespace) -> dict[str, str]:
    """What both sides run with: with --as-avx2-cpu, oneDNN, ATen and MKL kept to AVX2 (no AVX-512, no native
    bf16), as on the fp32-only CPUs the workshop's Graviton2 and x86 nodes have."""
    return AVX2_ENVIRONMENT if args.as_avx2_cpu else {}


def trainer_precision(args: argparse.Namespace) -> str:
    """`auto` picks from /proc/cpuinfo, which --as-avx2-cpu cannot change: there, fp32, as auto picks on AVX2."""
    return "fp32" if args.as_avx2_cpu else args.trainer_precision


def trainer_entry(data: Path, output: Path, args: argparse.Namespace) -> list[str]:
    entry = ["-m", TRAINER_MODULE, "train", "--dataset", "cifar10", "--data-dir", str(data.parent)]
    entry += ["--model", "workshop-cnn", "--epochs", str(args.epochs), "--batch-size", str(args.batch_size)]
    return [*entry, "--seed", "0", "--output-dir", str(output), "--precision", trainer_precision(args)]


def workshop_entry(data: Path, output: Path, args: argparse.Namespace) -> list[str]:
    """The workshop's script as it is; it runs from its folder (`args.baseline`)."""
    entry = [WORKSHOP_SCRIPT, f"{data}/", "--epochs", str(args.epochs), "--batch-size", str(args.batch_size)]
    entry += ["--workers", str(args.baseline_workers), "--model-file", str(output / "model.pth")]
    return [*entry, "--checkpoint-file", str(output / "checkpoint.pth.tar")]


def run_trainer(data: Path, work: Path, args: argparse.Namespace) -> Run:
    output = work / "trainer"
    command = [*torchrun(args.nproc), *trainer_entry(data, output, args)]
    wall, cpu, peak, _ = measured(command, REPOSITORY, cpu_environment(args))
    summary = json.loads((output / "summary.json").read_text())
    epoch = summary["images_trained"] / summary["images_per_second"] / args.epochs
    return Run(wall, epoch, summary["images_per_second"], cpu, peak, summary["precision"])


def run_workshop_script(data: Path, work: Path, args: argparse.Namespace) -> Run:
    """The workshop's script from its folder; its time per epoch from when it says training starts to when rank 0
    has saved the last epoch's checkpoint (it saves one every epoch; so does the trainer)."""
    output = work / "workshop"
    output.mkdir(parents=True, exist_ok=True)
    command = [*torchrun(args.nproc), *workshop_entry(data, output, args)]
    wall, cpu, peak, lines = measured(command, args.baseline, cpu_environment(args))
    started = min(second for second, line in lines if WORKSHOP_STARTED in line)
    done = max(second for second, line in lines if WORKSHOP_EPOCH_DONE in line)
    epoch = (done - started) / args.epochs
    return Run(wall, epoch, args.train_images / epoch, cpu, peak)


def workshop_style_entry(data: Path, output: Path, args: argparse.Namespace) -> list[str]:
    entry = ["-m", "benchmarks.workshop_baseline", "--dataset", "cifar10", "--data-dir", str(data.parent)]
    entry += ["--model", "workshop-cnn", "--epochs", str(args.epochs), "--batch-size", str(args.batch_size)]
    return [*entry, "--output", str(output / "summary.json")]


def baseline_entry(data: Path, output: Path, args: argparse.Namespace) -> tuple[list[str], Path]:
    """The baseline's command after torchrun's options, and the folder it runs from."""
    if args.baseline:
        return workshop_entry(data, output, args), args.baseline
    return workshop_style_entry(data, output, args), REPOSITORY


def run_workshop_style_loop(data: Path, work: Path, args: argparse.Namespace) -> Run:
    output = work / "loop"
    output.mkdir(parents=True, exist_ok=True)
    command = [*torchrun(args.nproc), *workshop_style_entry(data, output, args)]
    wall, cpu, peak, _ = measured(command, REPOSITORY, cpu_environment(args))
    images_per_second = json.loads((output / "summary.json").read_text())["images_per_second"]
    return Run(wall, args.train_images / images_per_second, images_per_second, cpu, peak)


def machine(args: argparse.Namespace) -> dict[str, Any]:
    flags = precision.cpu_flags()
    names = (
        [
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith(("model name", "CPU part"))
        ]
        if Path("/proc/cpuinfo").exists()
        else []
    )
    return {
        "cpu": names[0] if names else platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "native_bf16": precision.cpu_has_native_bf16(flags, platform.machine()),
        "avx512f": "avx512f" in flags,
        "amx_bf16": "amx_bf16" in flags,
        "python": platform.python_version(),
        "limited_to": "AVX2" if args.as_avx2_cpu else None,
    }


FIELDS = {
    "process_seconds": "whole process, s",
    "epoch_seconds": "time per epoch once started, s",
    "images_per_second": "images per second",
    "cpu_seconds": "CPU seconds",
    "peak_mib": "peak memory of one process, MiB",
}


def compare(ours: list[Run], theirs: list[Run]) -> dict[str, dict[str, Any]]:
    """Per measure: each side's runs and median, and the ratio ours / theirs pair by pair and its median."""
    table = {}
    for field in FIELDS:
        mine = [getattr(run, field) for run in ours]
        other = [getattr(run, field) for run in theirs]
        ratios = [a / b for a, b in zip(mine, other, strict=True)]
        table[field] = {
            "trainer": [round(v, 1) for v in mine],
            "baseline": [round(v, 1) for v in other],
            "trainer_median": round(statistics.median(mine), 1),
            "baseline_median": round(statistics.median(other), 1),
            "ratios": [round(r, 3) for r in ratios],
            "ratio_median": round(statistics.median(ratios), 3),
        }
    return table


def parse(argv: list[str] | None, description: str, runs_help: str, runs: int = 3) -> argparse.Namespace:
    """The settings both this benchmark and `benchmarks.phases` take; `--pairs` is how many runs of each side."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--output", type=Path, required=True, help="JSON results file")
    parser.add_argument("--baseline", type=Path, help=f"the workshop's 3-build-container folder ({WORKSHOP_SCRIPT})")
    parser.add_argument(
        "--baseline-workers",
        type=int,
        default=0,
        help="the workshop script's --workers (its "
        "manifest passes 15; each is a process competing with the ranks for the CPUs)",
    )
    parser.add_argument(
        "--trainer-precision",
        default="auto",
        choices=("auto", "fp32"),
        help="fp32 compares the same fp32 kernels on a CPU with native bf16 (auto would pick bf16 there)",
    )
    parser.add_argument(
        "--as-avx2-cpu",
        action="store_true",
        help="both sides limited to AVX2 (oneDNN, ATen, MKL): an fp32-only x86 CPU on one that has more; "
        "the trainer in fp32",
    )
    parser.add_argument("--pairs", type=int, default=runs, help=runs_help)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128, help="per rank, for both")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--train-images", type=int, default=10000)
    parser.add_argument("--test-images", type=int, default=1000, help="the trainer scores them after each epoch")
    args = parser.parse_args(argv)
    if args.baseline is not None and not (args.baseline / WORKSHOP_SCRIPT).is_file():
        parser.error(f"--baseline {args.baseline}: no {WORKSHOP_SCRIPT} there (give the workshop's 3-build-container)")
    if args.pairs < 1 or args.train_images < 5 * args.batch_size * args.nproc:
        parser.error("--pairs must be 1 or more and --train-images at least 5 x batch size x ranks")
    if args.as_avx2_cpu and args.trainer_precision != "auto":
        parser.error("--as-avx2-cpu runs the trainer in fp32 already: leave out --trainer-precision")
    return args


def baseline_name(args: argparse.Namespace) -> str:
    if args.baseline:
        return f"workshop script {args.baseline / WORKSHOP_SCRIPT}"
    return "workshop-style loop (benchmarks/workshop_baseline.py, not the workshop's own script)"


def header(args: argparse.Namespace) -> dict[str, Any]:
    """What every results file starts with: the machine, the settings and the baseline."""
    settings = {key: str(value) if isinstance(value, Path) else value for key, value in vars(args).items()}
    return {"machine": machine(args), "settings": settings, "baseline": baseline_name(args)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv, "The bundled trainer against a baseline, in turn, pair by pair.", "pairs of runs, in turn")
    run_baseline = run_workshop_script if args.baseline else run_workshop_style_loop
    ours: list[Run] = []
    theirs: list[Run] = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        data = write_cifar_batches(work / "data", args.train_images, args.test_images)
        for pair in range(args.pairs):
            ours.append(run_trainer(data, work / f"pair-{pair}", args))
            theirs.append(run_baseline(data, work / f"pair-{pair}", args))
            print(
                f"pair {pair + 1}/{args.pairs}: trainer {ours[-1].process_seconds:.1f} s, "
                f"baseline {theirs[-1].process_seconds:.1f} s",
                flush=True,
            )
    results = {
        **header(args),
        "runs": {"trainer": [asdict(run) for run in ours], "baseline": [asdict(run) for run in theirs]},
        "trainer_precision": sorted({run.precision for run in ours}),
        "compared": compare(ours, theirs),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(report(results))
    return results


def describe(machine: dict[str, Any]) -> str:
    if machine.get("limited_to"):
        return f"{machine['cpu']}, {machine['cpus']} CPUs, run as {machine['limited_to']} only (no native bf16)"
    return f"{machine['cpu']}, {machine['cpus']} CPUs, native bf16 {'yes' if machine['native_bf16'] else 'no'}"


def report(results: dict[str, Any]) -> str:
    m, s = results["machine"], results["settings"]
    lines = [
        f"{describe(m)}; {s['nproc']} ranks, "
        f"batch {s['batch_size']} per rank, {s['train_images']:,} CIFAR-format images, {s['epochs']} epoch(s), "
        f"{s['pairs']} pairs run in turn; the trainer in {', '.join(results['trainer_precision'])}, the baseline in fp32",
        f"baseline: {results['baseline']}",
        "",
        "| | trainer (median) | baseline (median) | trainer / baseline, pair by pair (median) |",
        "|---|---|---|---|",
    ]
    for field, label in FIELDS.items():
        row = results["compared"][field]
        pairs = ", ".join(f"{r:.2f}" for r in row["ratios"])
        lines.append(
            f"| {label} | {row['trainer_median']:,} | {row['baseline_median']:,} | {pairs} "
            f"(**{row['ratio_median']:.2f}**) |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
