"""Read and write the IDX format MNIST ships in (optionally gzip-compressed)."""

import gzip
import struct
from pathlib import Path

import numpy as np

_DTYPES = {
    0x08: np.uint8,
    0x09: np.int8,
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODES = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09}


def read_idx(path: Path) -> np.ndarray:
    """The array stored in `path`; raises ValueError naming the file when it is not IDX."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as stream:
            data = stream.read()
    except (OSError, EOFError) as error:
        raise ValueError(f"{path}: cannot read ({error})") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _DTYPES:
        raise ValueError(f"{path}: not an IDX file (bad magic number)")
    dtype, ndim = np.dtype(_DTYPES[data[2]]), data[3]
    header = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}I", data[4:header])
    expected = header + int(np.prod(shape)) * dtype.itemsize
    if len(data) != expected:
        raise ValueError(f"{path}: truncated or oversized IDX file ({len(data)} bytes, header says {expected})")
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write `array` (uint8 or int8) as IDX, gzip-compressed when `path` ends in .gz."""
    code = _CODES.get(array.dtype)
    if code is None:
        raise ValueError(f"write_idx supports uint8 and int8 arrays, not {array.dtype}")
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as stream:
        stream.write(header + np.ascontiguousarray(array).tobytes())
