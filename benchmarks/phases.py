"""Where one epoch's time goes, the trainer's and the baseline's, phase by phase, from torch.profiler.

Each side runs under `benchmarks.profiled` (the entry unchanged, its phases labelled) on the same CIFAR-format data
and settings as `benchmarks.paired`, in turn when `--pairs` asks for more than one run of each; the table gives rank
0's seconds per phase (medians over the runs) and the difference. The profiler adds a little to every operator, so
the times are a few percent above the paired benchmark's: this is where the time goes, the paired benchmark is how
long it takes. `python -m benchmarks.phases --help`, or `make bench-phases [BASELINE=<folder>]`.
"""

import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import paired

PHASES = (
    "start-up imports",
    "set-up until the first step",
    "data",
    "forward",
    "backward",
    "gradient all-reduce wait",
    "optimizer",
    "loop overhead",
    "metrics",
    "stop vote",
    "collectives",
    "other operators",
    "checkpoint",
    "evaluation",
    "final outputs",
)
CONVOLUTIONS = ("aten::mkldnn_convolution", "aten::convolution_backward", "aten::_slow_conv2d_forward")
STEP_PHASES = PHASES[2:12]
"""What a training step is made of: the time per epoch, but for a checkpoint or an evaluation."""


def profile(entry: list[str], cwd: Path, folder: Path, args: Any) -> dict[str, Any]:
    """One run of `entry` under torchrun, every rank profiled: rank 0's record and the whole process's seconds."""
    command = [*paired.torchrun(args.nproc), "-m", "benchmarks.profiled", str(folder), *entry]
    path = os.pathsep.join(filter(None, [str(paired.REPOSITORY), os.environ.get("PYTHONPATH")]))
    wall, _, _, _ = paired.measured(command, cwd, {**paired.cpu_environment(args), "PYTHONPATH": path})
    record = json.loads((folder / "rank-0.json").read_text())
    return {**record, "process_seconds": round(wall, 3)}


def medians(records: list[dict[str, Any]]) -> dict[str, float]:
    """Per phase, the median over the runs of rank 0's seconds; the step's phases' sum and the convolutions."""
    table = {phase: statistics.median(r["phases"].get(phase, 0.0) for r in records) for phase in PHASES}
    table["training steps"] = statistics.median(sum(r["phases"].get(p, 0.0) for p in STEP_PHASES) for r in records)
    table["of which convolutions (forward and backward)"] = statistics.median(
        sum(seconds for name, seconds in r["step_operators"].items() if name in CONVOLUTIONS) for r in records
    )
    table["whole process"] = statistics.median(r["process_seconds"] for r in records)
    return {name: round(value, 3) for name, value in table.items()}


def operator_medians(records: list[dict[str, Any]]) -> dict[str, float]:
    names = {name for r in records for name in r["step_operators"]}
    return {name: round(statistics.median(r["step_operators"].get(name, 0.0) for r in records), 3) for name in names}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = paired.parse(
        argv,
        "Where one epoch's time goes: the trainer and a baseline, phase by phase.",
        "runs of each side, in turn",
        runs=1,
    )
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        data = paired.write_cifar_batches(work / "data", args.train_images, args.test_images)
        for run in range(args.pairs):
            folder = work / f"run-{run}"
            ours.append(
                profile(
                    paired.trainer_entry(data, folder / "trainer", args),
                    paired.REPOSITORY,
                    folder / "trainer-profile",
                    args,
                )
            )
            (folder / "baseline").mkdir(parents=True)
            entry, cwd = paired.baseline_entry(data, folder / "baseline", args)
            theirs.append(profile(entry, cwd, folder / "baseline-profile", args))
    results = {
        **paired.header(args),
        "runs": {"trainer": ours, "baseline": theirs},
        "trainer": medians(ours),
        "baseline_phases": medians(theirs),
        "trainer_operators": operator_medians(ours),
        "baseline_operators": operator_medians(theirs),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(report(results))
    return results


def report(results: dict[str, Any]) -> str:
    s = results["settings"]
    lines = [
        f"{paired.describe(results['machine'])}; {s['nproc']} ranks, batch {s['batch_size']} per rank, "
        f"{s['train_images']:,} CIFAR-format images, {s['epochs']} epoch(s), rank 0, median of {s['pairs']} run(s)",
        f"baseline: {results['baseline']}",
        "",
        "| phase | trainer, s | baseline, s | difference, s |",
        "|---|---|---|---|",
    ]
    ours, theirs = results["trainer"], results["baseline_phases"]
    for name in ours:
        if ours[name] or theirs[name]:
            strong = "**" if name in ("training steps", "whole process") else ""
            lines.append(
                f"| {strong}{name}{strong} | {ours[name]:.2f} | {theirs[name]:.2f} | {ours[name] - theirs[name]:+.2f} |"
            )
    lines += [
        "",
        "| operator in the steps' forward and backward (self time) | trainer, s | baseline, s |",
        "|---|---|---|",
    ]
    ours, theirs = results["trainer_operators"], results["baseline_operators"]
    for name in sorted(ours.keys() | theirs.keys(), key=lambda n: -max(ours.get(n, 0.0), theirs.get(n, 0.0)))[:10]:
        lines.append(f"| `{name}` | {ours.get(name, 0.0):.2f} | {theirs.get(name, 0.0):.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
