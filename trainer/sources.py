"""Where the official dataset archives live and what their bytes must hash to."""

from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteFile:
    name: str
    sha256: str
    size: int


@dataclass(frozen=True)
class DatasetSource:
    dataset: str
    default_url: str
    """Base URL; each file is fetched from `<base>/<file name>`."""
    files: tuple[RemoteFile, ...]
    extracts_to: str | None = None
    """Directory a tar archive unpacks into, when the dataset is an archive."""


MNIST = DatasetSource(
    dataset="mnist",
    # The mirror torchvision uses; yann.lecun.com throttles and often refuses.
    default_url="https://ossci-datasets.s3.amazonaws.com/mnist",
    files=(
        RemoteFile(
            "train-images-idx3-ubyte.gz", "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609", 9_912_422
        ),
        RemoteFile(
            "train-labels-idx1-ubyte.gz", "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c", 28_881
        ),
        RemoteFile(
            "t10k-images-idx3-ubyte.gz", "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", 1_648_877
        ),
        RemoteFile(
            "t10k-labels-idx1-ubyte.gz", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", 4_542
        ),
    ),
)

CIFAR10 = DatasetSource(
    dataset="cifar10",
    default_url="https://www.cs.toronto.edu/~kriz",
    files=(
        RemoteFile(
            "cifar-10-python.tar.gz", "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce", 170_498_071
        ),
    ),
    extracts_to="cifar-10-batches-py",
)

SOURCES = {source.dataset: source for source in (MNIST, CIFAR10)}
