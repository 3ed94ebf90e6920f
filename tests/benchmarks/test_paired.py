"""The paired benchmark's harness, tiny: it runs both sides in turn, reads the workshop script's own markers, and
compares pair by pair (this checks the harness and its arithmetic, not the speed)."""

import json
from pathlib import Path

import pytest

from benchmarks import paired
from eks_ddp.trainer import datasets

STAND_IN = '''"""Stands in for the workshop's cifar10-model-train.py: its command line, its markers, its checkpoint file."""
import argparse, os, time
from pathlib import Path
parser = argparse.ArgumentParser()
parser.add_argument("data")
for flag in ("--workers", "--epochs", "--batch-size"):
    parser.add_argument(flag, type=int)
parser.add_argument("--model-file")
parser.add_argument("--checkpoint-file")
args = parser.parse_args()
assert sorted(os.listdir(args.data))[:2] == ["data_batch_1", "data_batch_2"] and args.data.endswith("/")
assert os.environ["ONEDNN_MAX_CPU_ISA"] == "AVX2" and os.environ["ATEN_CPU_CAPABILITY"] == "avx2"  # --as-avx2-cpu
print("Running on processor type: cpu")
for epoch in range(args.epochs):
    time.sleep(0.5)
    if os.environ["RANK"] == "0":
        Path(args.checkpoint_file).write_text("x")
        print(f"=> saved checkpoint for epoch {epoch + 1} at {args.checkpoint_file}")
'''


def test_cifar_batches_are_what_the_trainer_reads(tmp_path: Path) -> None:
    batches = paired.write_cifar_batches(tmp_path, train_images=1003, test_images=7)
    splits = datasets.load("cifar10", batches.parent)
    assert splits.train_x.shape == (1003, 3, 32, 32) and splits.test_x.shape == (7, 3, 32, 32)


def test_each_pairs_ratio_and_the_medians() -> None:
    """Three pairs: every measure's ratio is the trainer's over the baseline's of the same pair, and the medians are
    taken per side and over the ratios (not a ratio of medians)."""
    ours = [
        paired.Run(10, 5, 400, 20, 700, "bf16"),
        paired.Run(30, 6, 300, 25, 720, "bf16"),
        paired.Run(12, 4, 500, 21, 710, "bf16"),
    ]
    theirs = [paired.Run(20, 10, 200, 40, 700), paired.Run(20, 10, 200, 50, 800), paired.Run(40, 8, 250, 42, 690)]
    compared = paired.compare(ours, theirs)
    assert (
        compared["process_seconds"]["ratios"] == [0.5, 1.5, 0.3] and compared["process_seconds"]["ratio_median"] == 0.5
    )
    assert compared["process_seconds"]["trainer_median"] == 12 and compared["process_seconds"]["baseline_median"] == 20
    assert compared["images_per_second"]["ratios"] == [2.0, 1.5, 2.0] and compared["peak_mib"]["ratio_median"] == 1.0
    results = {
        "machine": {"cpu": "Test CPU", "cpus": 2, "native_bf16": True},
        "baseline": "a loop",
        "trainer_precision": ["bf16"],
        "settings": {"nproc": 2, "batch_size": 128, "train_images": 4000, "epochs": 1, "pairs": 3},
        "compared": compared,
    }
    table = paired.report(results)
    assert "| whole process, s | 12 | 20 | 0.50, 1.50, 0.30 (**0.50**) |" in table
    assert "the trainer in bf16, the baseline in fp32" in table


@pytest.mark.slow
def test_the_workshop_script_and_the_trainer_run_in_turn(tmp_path: Path) -> None:
    """One real pair (a rank each) as on an AVX2 CPU: the trainer's summary and the workshop script's own markers are
    read, and both sides run with the instruction sets limited (the stand-in checks its environment)."""
    folder = tmp_path / "3-build-container"
    folder.mkdir()
    (folder / paired.WORKSHOP_SCRIPT).write_text(STAND_IN)
    output = tmp_path / "bench.json"
    tiny = ["--pairs", "1", "--nproc", "1", "--train-images", "640", "--test-images", "64", "--batch-size", "64"]
    results = paired.main(["--output", str(output), "--baseline", str(folder), "--as-avx2-cpu", *tiny])
    assert json.loads(output.read_text()) == results and results["baseline"].startswith("workshop script ")
    assert results["trainer_precision"] == ["fp32"] and results["machine"]["limited_to"] == "AVX2"
    assert "CPUs, run as AVX2 only (no native bf16); 1 ranks" in paired.report(results)
    (ours,), (theirs,) = results["runs"]["trainer"], results["runs"]["baseline"]
    # The stand-in sleeps 0.5 s in its one epoch, between its two markers.
    assert 0.45 < theirs["epoch_seconds"] < 3 and theirs["images_per_second"] == pytest.approx(
        640 / theirs["epoch_seconds"]
    )
    assert ours["epoch_seconds"] < ours["process_seconds"] and ours["cpu_seconds"] > 1 and ours["peak_mib"] > 100
    assert results["compared"]["process_seconds"]["ratios"] == [
        round(ours["process_seconds"] / theirs["process_seconds"], 3)
    ]


def test_a_folder_without_the_script_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        paired.main(["--output", str(tmp_path / "b.json"), "--baseline", str(tmp_path)])
    assert f"--baseline {tmp_path}: no cifar10-model-train.py there" in capsys.readouterr().err
