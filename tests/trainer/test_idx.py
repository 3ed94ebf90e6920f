from pathlib import Path

import numpy as np
import pytest

from eks_ddp.trainer.idx import read_idx, write_idx


@pytest.mark.parametrize("name", ["images-idx3-ubyte", "images-idx3-ubyte.gz"])
def test_round_trip(tmp_path: Path, name: str) -> None:
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / name, array)
    assert np.array_equal(read_idx(tmp_path / name), array)


def test_truncated_file_is_reported_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "labels-idx1-ubyte"
    write_idx(path, np.arange(10, dtype=np.uint8))
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(ValueError, match=r"labels-idx1-ubyte: truncated or oversized IDX file \(15 bytes, header says 18\)"):
        read_idx(path)


def test_not_idx(tmp_path: Path) -> None:
    path = tmp_path / "x"
    path.write_bytes(b"PK\x03\x04 not idx")
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(path)
