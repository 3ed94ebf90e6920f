import pickle
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from eks_ddp.trainer import datasets
from eks_ddp.trainer.errors import UsageError


def test_digits_is_an_80_20_stratified_split_standardized_on_train() -> None:
    splits = datasets.load("digits", None)
    assert splits.train_x.shape == (1437, 1, 8, 8) and splits.test_x.shape == (360, 1, 8, 8)
    assert splits.train_x.dtype == torch.float32 and splits.train_y.dtype == torch.int64
    assert abs(float(splits.train_x.mean())) < 1e-5 and abs(float(splits.train_x.std()) - 1) < 1e-3
    assert torch.bincount(splits.test_y).min() >= 35  # every digit is in the test split


def test_digits_are_scikit_learns_data_and_split_without_importing_it() -> None:
    """The same tensors the trainer built with load_digits and train_test_split (random_state=0), in the same order,
    from a run that never imports scikit-learn (a second of every rank's start-up)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    script = "import sys; from eks_ddp.trainer import datasets as d; d.load('digits', None)\n"
    script += "print('sklearn' in sys.modules)"
    imported = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert imported == "False\n"
    images, labels = load_digits(return_X_y=True)
    train_x, test_x, train_y, test_y = train_test_split(
        images.reshape(-1, 1, 8, 8) / 16.0, labels, test_size=0.2, stratify=labels, random_state=0
    )
    parts = [np.asarray(part) for part in (train_x, train_y, test_x, test_y)]
    expected = datasets._standardized("digits", datasets.DIGIT_CLASSES, parts[0], parts[1], parts[2], parts[3])
    splits = datasets.load("digits", None)
    for field in ("train_x", "train_y", "test_x", "test_y"):
        assert torch.equal(getattr(splits, field), getattr(expected, field)), field


def test_mnist_reads_the_official_idx_files(mnist_subset: Path) -> None:
    splits = datasets.load("mnist", mnist_subset)
    assert splits.train_x.shape == (4000, 1, 28, 28) and splits.test_x.shape == (1000, 1, 28, 28)
    assert sorted(torch.bincount(splits.test_y).tolist()) == [100] * 10


def test_mnist_names_the_missing_file_and_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--data-dir .*: train-images-idx3-ubyte.gz not found \(run `python -m eks_ddp.trainer prepare-data --dataset mnist"):
        datasets.load("mnist", tmp_path)


def test_missing_data_dir_is_named() -> None:
    with pytest.raises(UsageError, match=r"--data-dir /nonexistent/mnist: no such directory"):
        datasets.load("mnist", Path("/nonexistent/mnist"))


def _write_cifar_batch(path: Path, count: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    batch = {b"data": rng.integers(0, 256, (count, 3072), dtype=np.uint8), b"labels": rng.integers(0, 10, count).tolist()}
    path.write_bytes(pickle.dumps(batch))


def test_cifar10_reads_the_python_batches(tmp_path: Path) -> None:
    batches = tmp_path / "cifar-10-batches-py"
    batches.mkdir()
    for index in range(1, 6):
        _write_cifar_batch(batches / f"data_batch_{index}", 20, index)
    _write_cifar_batch(batches / "test_batch", 30, 0)
    splits = datasets.load("cifar10", tmp_path)
    assert splits.train_x.shape == (100, 3, 32, 32) and splits.test_x.shape == (30, 3, 32, 32)
    assert splits.classes[0] == "plane" and len(splits.classes) == 10


class _Exploit:
    def __reduce__(self):  # noqa: ANN204
        return (print, ("pwned",))


def test_cifar10_batches_cannot_run_code(tmp_path: Path) -> None:
    batches = tmp_path / "cifar-10-batches-py"
    batches.mkdir()
    (batches / "data_batch_1").write_bytes(pickle.dumps({b"data": _Exploit(), b"labels": []}))
    with pytest.raises(UsageError, match=r"data_batch_1: not a CIFAR-10 python batch \(refusing to load builtins.print\)"):
        datasets.load("cifar10", tmp_path)


def test_synthetic_has_the_requested_shape_and_is_reproducible() -> None:
    shape = datasets.SyntheticShape(channels=2, height=12, width=10, train_size=50, classes=3)
    first, second = datasets.load("synthetic", None, shape, seed=4), datasets.load("synthetic", None, shape, seed=4)
    assert first.train_x.shape == (50, 2, 12, 10) and first.test_x.shape == (10, 2, 12, 10)
    assert torch.equal(first.train_x, second.train_x) and first.classes == ("class-0", "class-1", "class-2")


def test_standardizing_in_chunks_gives_the_same_values_without_a_float64_copy() -> None:
    """The same float32 values as dividing the whole split in float64 and casting (the former path, which held
    8 bytes a pixel on top of the result in every rank), across chunk boundaries; NumPy's peak stays near the
    float32 result (tracemalloc sees NumPy's buffers)."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (3 * datasets.SCALE_CHUNK + 5, 3, 32, 32), dtype=np.uint8)
    labels, test = rng.integers(0, 10, len(images)), images[:300]
    tracemalloc.start()
    splits = datasets._standardized("c", ("a",), images, labels, test, labels[:300], 255.0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    train = torch.from_numpy(np.ascontiguousarray(images / 255.0, dtype=np.float32))
    mean, std = train.mean(dim=(0, 2, 3), keepdim=True), train.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-6)
    assert torch.equal(splits.train_x, (train - mean) / std)
    expected_test = torch.from_numpy(np.ascontiguousarray(test / 255.0, dtype=np.float32))
    assert torch.equal(splits.test_x, (expected_test - mean) / std)
    assert peak < 2 * images.size * 4, peak  # the result and one chunk; the former path held 3 x the result
