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


@pytest.mark.slow
def test_the_workshop_script_and_the_trainer_run_in_turn_and_compare_pair_by_pair(tmp_path: Path) -> None:
    folder = tmp_path / "3-build-container"
    folder.mkdir()
    (folder / paired.WORKSHOP_SCRIPT).write_text(STAND_IN)
    output = tmp_path / "bench.json"
    tiny = ["--pairs", "2", "--nproc", "1", "--train-images", "640", "--test-images", "64", "--batch-size", "64"]
    results = paired.main(["--output", str(output), "--baseline", str(folder), *tiny])
    assert json.loads(output.read_text()) == results and results["baseline"].startswith("workshop script ")
    runs = results["runs"]
    assert len(runs["trainer"]) == len(runs["baseline"]) == 2
    for run in runs["baseline"]:  # the stand-in sleeps 0.5 s in its one epoch, between its two markers
        assert 0.45 < run["epoch_seconds"] < 3 and run["images_per_second"] == pytest.approx(640 / run["epoch_seconds"])
    for run in runs["trainer"]:
        assert run["epoch_seconds"] < run["process_seconds"] and run["cpu_seconds"] > 1 and run["peak_mib"] > 100
    compared = results["compared"]["process_seconds"]
    assert compared["ratios"] == [
        round(a["process_seconds"] / b["process_seconds"], 3)
        for a, b in zip(runs["trainer"], runs["baseline"], strict=True)
    ]
    assert "| whole process, s |" in paired.report(results)


def test_a_folder_without_the_script_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        paired.main(["--output", str(tmp_path / "b.json"), "--baseline", str(tmp_path)])
    assert f"--baseline {tmp_path}: no cifar10-model-train.py there" in capsys.readouterr().err
