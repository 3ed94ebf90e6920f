"""`prepare-data`: fetch the official dataset archives, verify them, unpack them.

Every file is streamed to a temporary name in the data directory while its SHA-256
is computed, and renamed to its real name only when size and hash match the
published values, so a name in the data directory always holds a verified file.
Verified files are never fetched again. Preparers of one directory take turns under an
exclusive `flock` (FSx for Lustre mounted with `flock` and EFS both honour it across
nodes): a DataPrepJob and every training pod's init container may start together, and
each later one finds the verified tree and leaves it alone.
"""

import fcntl
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tqdm import tqdm

from eks_ddp.trainer.atomic import fsync_directory
from eks_ddp.trainer.errors import DownloadError, UsageError
from eks_ddp.trainer.sources import DatasetSource, RemoteFile

CHUNK = 1 << 20
EXTRACTED_MARKER = ".verified-archive-sha256"


def file_url(source: str, name: str) -> str:
    """`source` itself when it already names the file (a presigned URL), else `source/name`."""
    parsed = urllib.parse.urlparse(source)
    if parsed.path.rsplit("/", 1)[-1] == name:
        return source
    return f"{source.rstrip('/')}/{name}"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def is_verified(path: Path, remote: RemoteFile) -> bool:
    return path.is_file() and path.stat().st_size == remote.size and sha256_of(path) == remote.sha256


def fetch(url: str, destination: Path, remote: RemoteFile, timeout: float = 60.0) -> None:
    """Download `url` to `destination` only if its bytes match `remote`; nothing is left otherwise."""
    digest = hashlib.sha256()
    handle, temporary_name = tempfile.mkstemp(dir=destination.parent, prefix=f".{destination.name}.", suffix=".part")
    temporary = Path(temporary_name)
    try:
        with open(handle, "wb") as sink:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response:
                    bar = tqdm(
                        total=remote.size,
                        unit="B",
                        unit_scale=True,
                        desc=remote.name,
                        disable=not sys.stderr.isatty(),
                        leave=False,
                    )
                    while chunk := response.read(CHUNK):
                        digest.update(chunk)
                        sink.write(chunk)
                        bar.update(len(chunk))
                    bar.close()
            except (urllib.error.URLError, OSError, ValueError) as error:
                raise DownloadError(f"{url}: download failed ({getattr(error, 'reason', None) or error})") from None
            sink.flush()
            size = sink.tell()
            if size != remote.size or digest.hexdigest() != remote.sha256:
                raise DownloadError(
                    f"{url}: {remote.name} does not match its published checksum "
                    f"({size} bytes, sha256 {digest.hexdigest()[:16]}...; expected {remote.size} bytes, "
                    f"sha256 {remote.sha256[:16]}...); the download was discarded"
                )
            os.fsync(sink.fileno())
        temporary.replace(destination)
        fsync_directory(destination.parent)
    finally:
        temporary.unlink(missing_ok=True)


def _extract(archive: Path, remote: RemoteFile, data_dir: Path, directory: str) -> str:
    """Unpack into a temporary directory, then swap it in: a half-unpacked tree never has the real name."""
    target = data_dir / directory
    marker = target / EXTRACTED_MARKER
    if marker.is_file() and marker.read_text().strip() == remote.sha256:
        return f"{directory}/: already unpacked from the verified archive"
    with tempfile.TemporaryDirectory(dir=data_dir, prefix=f".{directory}.") as scratch:
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(scratch, filter="data")
        except (tarfile.TarError, OSError) as error:
            raise DownloadError(f"{archive}: cannot unpack ({error})") from None
        unpacked = Path(scratch) / directory
        if not unpacked.is_dir():
            raise DownloadError(f"{archive}: has no {directory}/ directory")
        (unpacked / EXTRACTED_MARKER).write_text(remote.sha256 + "\n")
        if target.exists():
            shutil.rmtree(target)
        unpacked.replace(target)
    fsync_directory(data_dir)
    return f"{directory}/: unpacked"


@contextmanager
def exclusive(data_dir: Path) -> Iterator[bool]:
    """Hold the directory's preparation lock; yields whether another preparer held it first."""
    lock = data_dir.parent / f".{data_dir.name}.prepare-data.lock"
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            waited = False
        except BlockingIOError:
            print(f"prepare-data: waiting for another preparer of {data_dir}", file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
            waited = True
        try:
            yield waited
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare(source: DatasetSource, data_dir: Path, base_url: str | None = None) -> list[str]:
    """Make `data_dir` hold the verified files of `source`; returns one line per action."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--data-dir {data_dir}: cannot create ({error.strerror or error})") from None
    with exclusive(data_dir) as waited:
        report = [f"{data_dir}: waited for another preparer"] if waited else []
        return report + _prepare_locked(source, data_dir, base_url or source.default_url)


def _prepare_locked(source: DatasetSource, data_dir: Path, base: str) -> list[str]:
    report = []
    for remote in source.files:
        destination = data_dir / remote.name
        if is_verified(destination, remote):
            report.append(f"{remote.name}: already present and verified")
            continue
        fetch(file_url(base, remote.name), destination, remote)
        report.append(f"{remote.name}: downloaded and verified ({remote.size / 1e6:.1f} MB)")
    if source.extracts_to is not None:
        archive = source.files[0]
        report.append(_extract(data_dir / archive.name, archive, data_dir, source.extracts_to))
    return report
