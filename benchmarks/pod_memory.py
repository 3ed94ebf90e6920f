"""What one training pod's processes hold in memory at their peak: the figure a training pod asks for.

Runs the bundled trainer under torchrun as a pod runs it (one epoch, its checkpoints, evaluation and final outputs) on
full-size data with random content (MNIST's 60,000 + 10,000 28x28 images, CIFAR-10's 50,000 + 10,000 32x32x3: what a
rank holds depends on the sizes, not on the pixels), and samples every 50 ms the resident set of torchrun and each of
its ranks (/proc/<pid>/status VmRSS). It reports the peak of their sum (what the pod's memory cgroup charges, page
cache aside: the kernel reclaims that before it kills anything), the peak of each rank (VmHWM) and of torchrun.
`python -m benchmarks.pod_memory --dataset cifar10 --nproc 2`; workloads.training_pod names the results it uses.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.paired import TORCHRUN, write_cifar_batches
from eks_ddp.trainer.idx import write_idx
from eks_ddp.workloads.training_pod import TRAINER_MODULE

SAMPLE_SECONDS = 0.05
MNIST_FILES = (("train", 60_000), ("t10k", 10_000))


def write_mnist(directory: Path, seed: int = 0) -> Path:
    """MNIST's four IDX files at full size, random pixels and labels."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for prefix, count in MNIST_FILES:
        write_idx(directory / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (count, 28, 28), dtype=np.uint8))
        write_idx(directory / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, count, dtype=np.uint8))
    return directory


def _children(pid: int) -> list[int]:
    """Every descendant of `pid` (torchrun's ranks), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    found, queue = [], [pid]
    while queue:
        for child in parents.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def _status_kib(pid: int, *fields: str) -> dict[str, int]:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return {line.split(":")[0]: int(line.split()[1]) for line in lines if line.split(":")[0] in fields}


def measure(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """Run `command`; the peak MiB of its processes' summed resident sets, of its largest child and of itself."""
    errors = tempfile.TemporaryFile()  # a file, not a pipe: a full pipe would stop the run
    process = subprocess.Popen(command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=errors)
    peak_total, peak_child, peak_self = 0, 0, 0
    while process.poll() is None:
        children = _children(process.pid)
        statuses = {pid: _status_kib(pid, "VmRSS", "VmHWM") for pid in [process.pid, *children]}
        peak_total = max(peak_total, sum(s.get("VmRSS", 0) for s in statuses.values()))
        peak_child = max([peak_child, *(statuses[pid].get("VmHWM", 0) for pid in children)])
        peak_self = max(peak_self, statuses[process.pid].get("VmHWM", 0))
        time.sleep(SAMPLE_SECONDS)
    if process.returncode != 0:
        errors.seek(0)
        raise SystemExit(f"{' '.join(command[:8])} ... failed:\n{errors.read().decode()[-3000:]}")
    return {"pod_peak_mib": peak_total / 1024, "rank_peak_mib": peak_child / 1024, "torchrun_peak_mib": peak_self / 1024}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pod_memory", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--dataset", choices=("digits", "mnist", "cifar10", "synthetic"), required=True)
    parser.add_argument("--nproc", type=int, default=1, help="ranks in the pod (CPU pods run 1)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--output", type=Path, help="append the result as one JSON line here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as temporary:
        data = Path(temporary) / "data"
        if args.dataset == "mnist":
            write_mnist(data)
        elif args.dataset == "cifar10":
            write_cifar_batches(data, 50_000, 10_000)
        entry = ["-m", TRAINER_MODULE, "train", "--dataset", args.dataset, "--data-dir", str(data), "--epochs", "1"]
        entry += ["--batch-size", str(args.batch_size), "--output-dir", str(Path(temporary) / "out")]
        command = [TORCHRUN, "--standalone", "--nproc-per-node", str(args.nproc), *entry]
        settings = {key: value for key, value in vars(args).items() if key != "output"}
        result: dict[str, Any] = {**settings, **measure(command, {"PYTHONUNBUFFERED": "1"})}
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "arch": platform.machine()}
    print(json.dumps(result))
    if args.output:
        with args.output.open("a") as results:
            results.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
