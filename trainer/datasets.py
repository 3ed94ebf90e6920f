"""The four datasets, loaded once into memory as pre-normalized tensors.

Holding the whole split as one tensor lets the training loop gather a batch with a
single index operation: no DataLoader workers, no per-sample collation.
"""

import importlib.util
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from eks_ddp.trainer.errors import UsageError
from eks_ddp.trainer.idx import read_idx
from eks_ddp.trainer.sources import CIFAR10, MNIST

DIGITS_SPLIT = Path(__file__).resolve().parent / "data" / "digits-split.txt"

DATASETS = ("digits", "mnist", "cifar10", "synthetic")
CIFAR10_CLASSES = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
DIGIT_CLASSES = tuple(str(digit) for digit in range(10))


@dataclass(frozen=True)
class Splits:
    """Train and test tensors: images float32 (N, C, H, W) standardized per channel, labels int64."""

    name: str
    classes: tuple[str, ...]
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor

    @property
    def input_shape(self) -> tuple[int, int, int]:
        channels, height, width = self.train_x.shape[1:]
        return channels, height, width


@dataclass(frozen=True)
class SyntheticShape:
    channels: int = 3
    height: int = 32
    width: int = 32
    train_size: int = 8192
    classes: int = 10


def load(name: str, data_dir: Path | None, synthetic: SyntheticShape | None = None, seed: int = 0) -> Splits:
    if name == "digits":
        return _digits()
    if name == "synthetic":
        return _synthetic(synthetic or SyntheticShape(), seed)
    if data_dir is None:
        raise UsageError(f"--data-dir is required for --dataset {name}")
    if not data_dir.is_dir():
        raise UsageError(
            f"--data-dir {data_dir}: no such directory (run `python -m eks_ddp.trainer prepare-data --dataset {name} --data-dir {data_dir}`)"
        )
    if name == "mnist":
        return _mnist(data_dir)
    if name == "cifar10":
        return _cifar10(data_dir)
    raise UsageError(f"--dataset {name!r} is unknown; choose from {', '.join(DATASETS)}")


SCALE_CHUNK = 1024
"""Images scaled at a time: the float64 quotient of a chunk, not of the whole split, is ever held."""


def _float32(images: np.ndarray, scale: float) -> torch.Tensor:
    """`images / scale` as float32: the same values as dividing the whole array in float64 and casting it, without
    holding that float64 copy (8 bytes a pixel, twice the float32 result) in every rank."""
    out = np.empty(images.shape, dtype=np.float32)
    for start in range(0, len(images), SCALE_CHUNK):
        out[start : start + SCALE_CHUNK] = images[start : start + SCALE_CHUNK] / scale
    return torch.from_numpy(out)


def _standardized(
    name: str,
    classes: tuple[str, ...],
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    scale: float = 1.0,
) -> Splits:
    """Scale by `scale`, then standardize with the training split's per-channel mean and std (the test split never
    leaks in), in place: one float32 copy of each split is all a rank holds."""
    train, test = _float32(train_x, scale), _float32(test_x, scale)
    mean = train.mean(dim=(0, 2, 3), keepdim=True)
    std = train.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-6)
    return Splits(
        name=name,
        classes=classes,
        train_x=train.sub_(mean).div_(std),
        train_y=torch.from_numpy(np.asarray(train_y, dtype=np.int64)),
        test_x=test.sub_(mean).div_(std),
        test_y=torch.from_numpy(np.asarray(test_y, dtype=np.int64)),
    )


def _digits() -> Splits:
    """scikit-learn's bundled 1,797 8x8 digits, split 80/20 stratified with a fixed seed.

    Read from scikit-learn's own CSV without importing scikit-learn (which costs every rank about a second), and
    split by the indices its `train_test_split(..., stratify=labels, random_state=0)` returns, shipped in
    data/digits-split.txt (tests/trainer/test_datasets.py compares both with scikit-learn's own calls).
    """
    package = importlib.util.find_spec("sklearn")  # finds the package without running it
    if package is None or not package.submodule_search_locations:
        raise UsageError("--dataset digits: scikit-learn is not installed (pip install scikit-learn)")
    data = np.loadtxt(Path(package.submodule_search_locations[0], "datasets", "data", "digits.csv.gz"), delimiter=",")
    images, labels = data[:, :-1].reshape(-1, 1, 8, 8) / 16.0, data[:, -1].astype(np.int64)
    train, test = (np.array(line.split(), dtype=np.int64) for line in DIGITS_SPLIT.read_text().splitlines()[1:3])
    return _standardized("digits", DIGIT_CLASSES, images[train], labels[train], images[test], labels[test])


def _find(data_dir: Path, file_name: str, dataset: str) -> Path:
    for candidate in (data_dir / file_name, data_dir / file_name.removesuffix(".gz")):
        if candidate.is_file():
            return candidate
    raise UsageError(
        f"--data-dir {data_dir}: {file_name} not found "
        f"(run `python -m eks_ddp.trainer prepare-data --dataset {dataset} --data-dir {data_dir}`)"
    )


def _mnist(data_dir: Path) -> Splits:
    train_images, train_labels, test_images, test_labels = (
        _read_idx_or_fail(_find(data_dir, remote.name, "mnist")) for remote in MNIST.files
    )
    for images, labels in ((train_images, train_labels), (test_images, test_labels)):
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise UsageError(
                f"--data-dir {data_dir}: MNIST images {images.shape} and labels {labels.shape} do not match"
            )
    return _standardized(
        "mnist", DIGIT_CLASSES, train_images[:, None], train_labels, test_images[:, None], test_labels, 255.0
    )


def _read_idx_or_fail(path: Path) -> np.ndarray:
    try:
        return read_idx(path)
    except ValueError as error:
        raise UsageError(str(error)) from None


class _ArrayOnlyUnpickler(pickle.Unpickler):
    """Unpickles the CIFAR-10 batches (dicts of lists, bytes and numpy arrays) and nothing else.

    A pickle can run arbitrary code; a data directory should not be able to.
    """

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }

    def find_class(self, module: str, name: str):  # noqa: ANN201 (pickle's signature)
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        with path.open("rb") as stream:
            batch = _ArrayOnlyUnpickler(stream, encoding="bytes").load()
        images = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        labels = np.asarray(batch[b"labels"], dtype=np.int64)
    except (OSError, EOFError, KeyError, ValueError, TypeError, pickle.UnpicklingError) as error:
        raise UsageError(f"{path}: not a CIFAR-10 python batch ({error})") from None
    return images, labels


def _cifar10(data_dir: Path) -> Splits:
    assert CIFAR10.extracts_to is not None
    batches = data_dir / CIFAR10.extracts_to
    train_parts = [_cifar_batch(_find(batches, f"data_batch_{index}", "cifar10")) for index in range(1, 6)]
    test_images, test_labels = _cifar_batch(_find(batches, "test_batch", "cifar10"))
    train_images = np.concatenate([images for images, _ in train_parts])
    train_labels = np.concatenate([labels for _, labels in train_parts])
    return _standardized("cifar10", CIFAR10_CLASSES, train_images, train_labels, test_images, test_labels, 255.0)


def _synthetic(shape: SyntheticShape, seed: int) -> Splits:
    """Class prototypes plus noise: learnable (accuracy means something) and any shape (for throughput)."""
    generator = torch.Generator().manual_seed(seed)
    image_shape = (shape.channels, shape.height, shape.width)
    prototypes = torch.randn((shape.classes, *image_shape), generator=generator)

    def split(size: int) -> tuple[np.ndarray, np.ndarray]:
        labels = torch.randint(0, shape.classes, (size,), generator=generator)
        images = prototypes[labels] * 0.5 + torch.randn((size, *image_shape), generator=generator)
        return images.numpy(), labels.numpy()

    train_x, train_y = split(shape.train_size)
    test_x, test_y = split(max(shape.classes, shape.train_size // 5))
    classes = tuple(f"class-{index}" for index in range(shape.classes))
    return _standardized("synthetic", classes, train_x, train_y, test_x, test_y)
