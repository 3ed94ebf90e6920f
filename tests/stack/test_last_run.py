"""`make tensorboard`: TensorBoard serves the newest run's events, found under runs/ as the trainer writes them."""

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

from eks_ddp.tools.last_run import main, newest_events
from tests.conftest import ROOT, free_port


def _run(root: Path, name: str, tag: str, written: float) -> Path:
    events = root / "local" / "dev" / "shared" / "runs" / "mnist-ddp" / name / "tensorboard"
    with SummaryWriter(str(events)) as writer:
        writer.add_scalar(tag, 1.0, 0)
    for file in events.iterdir():
        os.utime(file, (written, written))
    return events


def test_the_newest_events_are_the_last_written_not_the_last_created(tmp_path: Path) -> None:
    now = time.time()
    resumed = _run(tmp_path, "first", "train/loss", now)  # created first, written last: a resumed run
    _run(tmp_path, "second", "train/other", now - 60)
    (tmp_path / "train" / "not-events").mkdir(parents=True)
    assert newest_events(tmp_path) == resumed


def test_without_events_it_says_what_to_run_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--runs", str(tmp_path)]) == 2
    error = f"error: --runs {tmp_path}: no TensorBoard events under it; run `make demo` first\n"
    assert capsys.readouterr().err == error


def test_tensorboard_serves_the_newest_runs_scalars(tmp_path: Path) -> None:
    now = time.time()
    _run(tmp_path, "old", "old/loss", now - 60)
    _run(tmp_path, "new", "train/loss", now)
    port = free_port()
    command = [sys.executable, "-m", "eks_ddp.tools.last_run", "--runs", str(tmp_path), "--port", str(port)]
    server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        deadline, tags = time.monotonic() + 60, {}
        while not tags.get(".") and time.monotonic() < deadline:  # it answers {} until it has read the events
            assert server.poll() is None, "TensorBoard exited"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugin/scalars/tags", timeout=2) as reply:
                    tags = json.loads(reply.read())
            except OSError:
                time.sleep(0.5)
        assert list(tags) == ["."] and list(tags["."]) == ["train/loss"]  # the newest run's, not the older one's
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert server.stdout is not None and "/new/tensorboard --host 127.0.0.1" in server.stdout.read()
