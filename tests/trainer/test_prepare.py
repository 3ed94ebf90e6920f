"""prepare-data against a real HTTP server on 127.0.0.1 serving generated files."""

import hashlib
import io
import multiprocessing
import tarfile
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from eks_ddp.trainer.errors import DownloadError
from eks_ddp.trainer.prepare import EXTRACTED_MARKER, file_url, prepare
from eks_ddp.trainer.sources import MNIST, DatasetSource, RemoteFile
from tests.conftest import run_trainer


class Server:
    """Serves `root` over HTTP and counts the GET requests per path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.requests: list[str] = []
        server = self

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append(self.path)
                super().do_GET()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/files"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "www"
    (root / "files").mkdir(parents=True)
    running = Server(root)
    yield running
    running.httpd.shutdown()
    running.httpd.server_close()


def _publish(server: Server, name: str, data: bytes) -> RemoteFile:
    (server.root / "files" / name).write_bytes(data)
    return RemoteFile(name, hashlib.sha256(data).hexdigest(), len(data))


def test_good_download_verifies_and_is_not_fetched_again(server: Server, tmp_path: Path) -> None:
    files = tuple(_publish(server, f"part-{index}.gz", bytes([index]) * (3000 + index)) for index in range(3))
    source = DatasetSource("generated", server.url, files)
    data_dir = tmp_path / "data"
    assert prepare(source, data_dir) == [f"part-{index}.gz: downloaded and verified (0.0 MB)" for index in range(3)]
    assert all((data_dir / remote.name).read_bytes() == bytes([index]) * (3000 + index) for index, remote in enumerate(files))
    assert len(server.requests) == 3
    assert prepare(source, data_dir) == [f"part-{index}.gz: already present and verified" for index in range(3)]
    assert len(server.requests) == 3
    assert sorted(path.name for path in data_dir.iterdir()) == ["part-0.gz", "part-1.gz", "part-2.gz"]


def test_corrupted_download_is_rejected_and_leaves_nothing_to_trust(server: Server, tmp_path: Path) -> None:
    good = b"the real archive" * 100
    remote = RemoteFile("archive.gz", hashlib.sha256(good).hexdigest(), len(good))
    (server.root / "files" / "archive.gz").write_bytes(good[:-1] + b"X")
    data_dir = tmp_path / "data"
    with pytest.raises(DownloadError, match=r"archive.gz does not match its published checksum .* the download was discarded"):
        prepare(DatasetSource("generated", server.url, (remote,)), data_dir)
    assert list(data_dir.iterdir()) == []


def test_a_bad_file_already_in_place_is_replaced(server: Server, tmp_path: Path) -> None:
    remote = _publish(server, "archive.gz", b"good bytes" * 50)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "archive.gz").write_bytes(b"half a downl")
    assert prepare(DatasetSource("generated", server.url, (remote,)), data_dir) == ["archive.gz: downloaded and verified (0.0 MB)"]
    assert (data_dir / "archive.gz").read_bytes() == b"good bytes" * 50


def test_missing_file_is_a_clear_error(server: Server, tmp_path: Path) -> None:
    remote = RemoteFile("absent.gz", "0" * 64, 10)
    with pytest.raises(DownloadError, match=r"/files/absent.gz: download failed \(File not found\)"):
        prepare(DatasetSource("generated", server.url, (remote,)), tmp_path / "data")
    assert list((tmp_path / "data").iterdir()) == []


def test_archive_is_unpacked_once_into_place(server: Server, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in (("batches/data_batch_1", b"one"), ("batches/test_batch", b"two")):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    remote = _publish(server, "batches.tar.gz", buffer.getvalue())
    source = DatasetSource("generated", server.url, (remote,), extracts_to="batches")
    data_dir = tmp_path / "data"
    assert prepare(source, data_dir)[-1] == "batches/: unpacked"
    assert (data_dir / "batches" / "test_batch").read_bytes() == b"two"
    assert (data_dir / "batches" / EXTRACTED_MARKER).read_text().strip() == remote.sha256
    assert prepare(source, data_dir) == ["batches.tar.gz: already present and verified", "batches/: already unpacked from the verified archive"]


def test_source_is_a_mirror_base_or_the_file_itself() -> None:
    assert file_url("https://mirror.example/mnist/", "t10k-labels-idx1-ubyte.gz") == "https://mirror.example/mnist/t10k-labels-idx1-ubyte.gz"
    presigned = "https://bucket.s3.amazonaws.com/data/cifar-10-python.tar.gz?X-Amz-Signature=abc"
    assert file_url(presigned, "cifar-10-python.tar.gz") == presigned


def test_cli_rejects_a_corrupted_mirror_with_one_line(server: Server, tmp_path: Path) -> None:
    for remote in MNIST.files:
        (server.root / "files" / remote.name).write_bytes(b"not mnist")
    data_dir = tmp_path / "mnist"
    result = run_trainer(["prepare-data", "--dataset", "mnist", "--data-dir", str(data_dir), "--source", server.url])
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "train-images-idx3-ubyte.gz does not match its published checksum" in result.stderr
    assert list(data_dir.iterdir()) == []


def _prepare_in_a_process(source: DatasetSource, data_dir: Path, results: "multiprocessing.Queue[tuple[int, str]]") -> None:
    try:
        results.put((0, " | ".join(prepare(source, data_dir))))
    except Exception as error:  # the process's exit status, as a CLI would give it
        results.put((1, f"{type(error).__name__}: {error}"))


def test_four_preparers_at_once_leave_one_verified_tree_and_all_succeed(server: Server, tmp_path: Path) -> None:
    """A DataPrepJob and three training pods' init containers starting together on one shared directory."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for index in range(200):
            content = bytes([index]) * 20_000
            info = tarfile.TarInfo(f"batches/part_{index}")
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    remote = _publish(server, "batches.tar.gz", buffer.getvalue())
    source = DatasetSource("generated", server.url, (remote,), extracts_to="batches")
    data_dir = tmp_path / "shared" / "data"
    context = multiprocessing.get_context("fork")
    results: "multiprocessing.Queue[tuple[int, str]]" = context.Queue()
    workers = [context.Process(target=_prepare_in_a_process, args=(source, data_dir, results)) for _ in range(4)]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
    assert [code for code, _ in outcomes] == [0, 0, 0, 0], outcomes
    assert server.requests.count("/files/batches.tar.gz") == 1  # fetched once, by whoever came first
    assert sum("waited for another preparer" in report for _, report in outcomes) >= 1
    assert sorted(p.name for p in (data_dir / "batches").iterdir()) == sorted([EXTRACTED_MARKER, *(f"part_{i}" for i in range(200))])
    assert [p.name for p in data_dir.iterdir() if p.name.startswith(".")] == []  # no scratch left behind
