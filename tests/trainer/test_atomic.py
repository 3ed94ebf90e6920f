"""A file rewritten by `write_atomically` holds its old bytes or all of the new, whatever fails and whenever: the new
bytes reach the disk in a temporary file beside it before the rename, the rename reaches it after, and a failure
leaves the old file and nothing else."""

import errno
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest

from eks_ddp.trainer.atomic import write_atomically

OLD, NEW = b"the previous checkpoint", b"the next checkpoint, longer than the previous one"


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _target(fd: int) -> Path:
    return Path(os.readlink(f"/proc/self/fd/{fd}"))


def test_a_rewrite_syncs_the_whole_new_file_then_renames_it_then_syncs_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a power cut at any moment would find depends on this order and nothing else."""
    path = tmp_path / "state.bin"
    path.write_bytes(OLD)
    events: list[str] = []
    renamed: list[Path] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        target = _target(fd)
        if target == tmp_path:
            events.append("fsync the directory")
        elif target == path:
            events.append("fsync the file itself")
        else:
            held = target.read_bytes()
            events.append(f"fsync a temporary file holding {'all' if held == NEW else len(held)} of the new bytes")
        real_fsync(fd)

    def replace(source: str, destination: Path) -> None:
        renamed.append(Path(source))
        events.append(f"rename it over the file, which held {'its old' if path.read_bytes() == OLD else 'other'} bytes")
        real_replace(source, destination)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    descriptors = _open_descriptors()
    write_atomically(path, NEW)
    assert events == [
        "fsync a temporary file holding all of the new bytes",
        "rename it over the file, which held its old bytes",
        "fsync the directory",
    ], events
    assert renamed[0].parent == tmp_path, f"{renamed[0]} is not beside the file: a rename across file systems is a copy"
    # One a killed process leaves is hidden from `ls` and says whose it was: `.state.bin.<random>.tmp`.
    assert re.fullmatch(r"\.state\.bin\.\w+\.tmp", renamed[0].name), renamed[0].name
    assert path.read_bytes() == NEW
    assert sorted(tmp_path.iterdir()) == [path], "the temporary file was left behind"
    assert _open_descriptors() == descriptors, "a file descriptor leaked"


def test_a_new_file_appears_whole(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    write_atomically(path, NEW)
    assert path.read_bytes() == NEW and sorted(tmp_path.iterdir()) == [path]


class _FullDisk:
    """A file whose disk fills up half way through the data."""

    def __init__(self, stream: BinaryIO, error: OSError) -> None:
        self.stream, self.error = stream, error

    def __enter__(self) -> "_FullDisk":
        return self

    def __exit__(self, *exception: object) -> None:
        self.stream.close()

    def write(self, data: bytes) -> int:
        self.stream.write(data[: len(data) // 2])
        self.stream.flush()
        raise self.error


def _fail_write(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    assert isinstance(error, OSError)
    real_fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, mode: _FullDisk(real_fdopen(fd, mode), error))


def _fail_call(name: str) -> Callable[[pytest.MonkeyPatch, BaseException], None]:
    def patch(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
        def failing(*args: object) -> None:
            raise error

        monkeypatch.setattr(os, name, failing)

    return patch


@pytest.mark.parametrize(
    ("fail", "error"),
    [
        pytest.param(_fail_write, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), id="write: disk full half way"),
        pytest.param(_fail_call("fsync"), OSError(errno.EIO, os.strerror(errno.EIO)), id="fsync: I/O error"),
        pytest.param(_fail_call("replace"), OSError(errno.EXDEV, os.strerror(errno.EXDEV)), id="rename refused"),
        # A user's Ctrl-C is no Exception, and arrives at any line.
        pytest.param(_fail_call("fsync"), KeyboardInterrupt(), id="fsync: interrupted"),
    ],
)
def test_a_failed_rewrite_keeps_the_old_bytes_leaves_nothing_and_says_so(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fail: Callable[[pytest.MonkeyPatch, BaseException], None],
    error: BaseException,
) -> None:
    path = tmp_path / "state.bin"
    path.write_bytes(OLD)
    fail(monkeypatch, error)
    descriptors = _open_descriptors()
    with pytest.raises(type(error)) as raised:
        write_atomically(path, NEW)
    assert raised.value is error, "the caller must see the failure itself"
    monkeypatch.undo()
    assert path.read_bytes() == OLD, "the old content was damaged"
    assert sorted(tmp_path.iterdir()) == [path], "the temporary file was left behind"
    assert _open_descriptors() == descriptors, "a file descriptor leaked"
