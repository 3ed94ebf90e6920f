import errno
import json
import logging
import os
import re
from pathlib import Path

import pytest
import torch

from eks_ddp.trainer.checkpoint import CheckpointManager, decode
from eks_ddp.trainer.errors import CheckpointError

DEFINITION = {"--dataset": "digits", "--model": "mlp", "--lr": 0.003, "--batch-size": 64}


def _state(step: int) -> dict[str, object]:
    return {"weights": torch.full((4,), float(step)), "progress": {"step": step}}


def _manager(directory: Path, keep: int = 3, definition: dict[str, object] = DEFINITION) -> CheckpointManager:
    return CheckpointManager(directory, dict(definition), keep=keep)


def test_newest_round_trips_and_only_the_last_k_are_kept(tmp_path: Path) -> None:
    manager = _manager(tmp_path, keep=2)
    for step in (10, 20, 30):
        manager.save(step, _state(step))
    assert manager.steps() == [30, 20]
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "step-000000020.json",
        "step-000000020.pt",
        "step-000000030.json",
        "step-000000030.pt",
    ]
    newest = manager.newest()
    assert newest is not None and newest.step == 30
    assert torch.equal(decode(newest.payload)["weights"], torch.full((4,), 30.0))


def test_truncated_newest_is_reported_and_the_previous_one_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = _manager(tmp_path)
    manager.save(10, _state(10))
    path = manager.save(20, _state(20))
    path.write_bytes(path.read_bytes()[:100])
    with caplog.at_level(logging.WARNING):
        newest = manager.newest()
    assert newest is not None and newest.step == 10
    assert "step-000000020.pt is corrupt or truncated" in caplog.text


def test_flipped_byte_is_detected(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.save(10, _state(10))
    path = manager.save(20, _state(20))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    newest = manager.newest()
    assert newest is not None and newest.step == 10


def test_payload_without_manifest_was_never_finished(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.save(10, _state(10))
    manager.save(20, _state(20))
    (tmp_path / "step-000000020.json").unlink()
    newest = manager.newest()
    assert newest is not None and newest.step == 10


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        ({"--lr": 0.01}, "--lr 0.01 does not match the run in --checkpoint-dir {dir}, started with --lr 0.003"),
        ({"--batch-size": None, "--global-batch-size": 128}, "--batch-size unset does not match the run in"),
        ({"--seed": 1}, "--seed 1 does not match the run in --checkpoint-dir {dir}, started with --seed unset"),
    ],
)
def test_a_resume_that_changes_what_defines_the_run_is_refused(
    tmp_path: Path, changed: dict[str, object], expected: str
) -> None:
    _manager(tmp_path).save(10, _state(10))
    definition = {key: value for key, value in {**DEFINITION, **changed}.items() if value is not None}
    with pytest.raises(CheckpointError, match=re.escape(expected.format(dir=tmp_path))):
        _manager(tmp_path, definition=definition).newest()


def test_checkpoints_of_an_older_format_are_refused(tmp_path: Path) -> None:
    _manager(tmp_path).save(10, _state(10))
    manifest = tmp_path / "step-000000010.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "format": 3}))
    with pytest.raises(
        CheckpointError, match=r"holds checkpoints of format 3 \(an older trainer\); this trainer resumes format 4"
    ):
        _manager(tmp_path).newest()


def test_disk_full_keeps_the_previous_checkpoint_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = _manager(tmp_path)
    manager.save(10, _state(10))
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(
        CheckpointError,
        match=r"could not write checkpoint .*step-000000020.pt \(No space left on device\); step 10 is kept",
    ):
        manager.save(20, _state(20))
    monkeypatch.undo()
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before
    newest = manager.newest()
    assert newest is not None and newest.step == 10
