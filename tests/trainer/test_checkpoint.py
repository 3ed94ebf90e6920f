import errno
import hashlib
import json
import logging
import os
import pickle
import re
from pathlib import Path

import pytest
import torch

from eks_ddp.trainer.checkpoint import FORMAT_VERSION, CheckpointManager, decode, encode
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
    assert newest is not None and (newest.step, newest.path) == (30, tmp_path / "step-000000030.pt")
    assert torch.equal(decode(newest.payload)["weights"], torch.full((4,), 30.0))


def test_the_manifest_is_the_format_a_field_a_line(tmp_path: Path) -> None:
    """The manifest the module describes, a field a line for the person or script reading it."""
    payload = _manager(tmp_path).save(20, _state(20)).read_bytes()
    expected = {
        "format": FORMAT_VERSION,
        "step": 20,
        "bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
        "definition": DEFINITION,
    }
    assert (tmp_path / "step-000000020.json").read_text() == json.dumps(expected, indent=1)


def test_a_checkpoint_directory_is_created_with_its_parents(tmp_path: Path) -> None:
    directory = tmp_path / "runs" / "first"
    _manager(directory).save(10, _state(10))
    assert sorted(path.name for path in directory.iterdir()) == ["step-000000010.json", "step-000000010.pt"]


def test_a_checkpoint_written_on_a_gpu_loads_on_a_cpu_only_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 loads to the CPU and broadcasts: torch would otherwise restore each tensor to the device it was saved
    from (here a CUDA device this machine does not have)."""
    monkeypatch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
    payload = encode(_state(10))
    monkeypatch.undo()
    weights = decode(payload)["weights"]
    assert weights.device == torch.device("cpu") and torch.equal(weights, torch.full((4,), 10.0))


class _Trap:
    """Unpickled, it calls `spring`: the code a tampered checkpoint could run."""

    ran = False

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_Trap.spring, ())

    @staticmethod
    def spring() -> None:
        _Trap.ran = True


def test_a_checkpoint_cannot_run_code_even_where_the_environment_allows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 makes torch.load unpickle anything unless the caller says weights_only."""
    payload = encode({"weights": torch.zeros(1), "trap": _Trap()})
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        decode(payload)
    assert not _Trap.ran


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


@pytest.mark.parametrize("damage", ["manifest cut short", "payload gone"])
def test_an_unreadable_newest_is_reported_and_the_previous_one_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    manager = _manager(tmp_path)
    for step in (10, 20, 30):
        manager.save(step, _state(step))
    for step in (20, 30):
        payload, manifest = manager.paths(step)
        if damage == "payload gone":
            payload.unlink()
        else:
            manifest.write_text(manifest.read_text()[:20])
    with caplog.at_level(logging.WARNING):
        newest = manager.newest()
    assert newest is not None and newest.step == 10
    assert "step-000000030.pt is unreadable" in caplog.text and "step-000000020.pt is unreadable" in caplog.text


def test_pruning_skips_a_payload_already_gone(tmp_path: Path) -> None:
    """A prune interrupted between a checkpoint's two files leaves its manifest: the next prune removes it, and the
    save that runs it succeeds."""
    manager = _manager(tmp_path, keep=1)
    manager.save(10, _state(10))
    manager.paths(10)[0].unlink()
    manager.save(20, _state(20))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["step-000000020.json", "step-000000020.pt"]


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
        (
            {"--lr": 0.01},
            "--lr 0.01 does not match the run in --checkpoint-dir {dir}, started with --lr 0.003; resume it with "
            "--lr 0.003, or start a new run with another --checkpoint-dir",
        ),
        ({"--batch-size": None, "--global-batch-size": 128}, "--batch-size unset does not match the run in"),
        ({"--seed": 1}, "--seed 1 does not match the run in --checkpoint-dir {dir}, started with --seed unset"),
    ],
)
def test_a_resume_that_changes_what_defines_the_run_is_refused(
    tmp_path: Path, changed: dict[str, object], expected: str
) -> None:
    _manager(tmp_path).save(10, _state(10))
    definition = {key: value for key, value in {**DEFINITION, **changed}.items() if value is not None}
    with pytest.raises(CheckpointError, match="^" + re.escape(expected.format(dir=tmp_path))):
        _manager(tmp_path, definition=definition).newest()


def test_checkpoints_of_an_older_format_are_refused(tmp_path: Path) -> None:
    _manager(tmp_path).save(10, _state(10))
    manifest = tmp_path / "step-000000010.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "format": 3}))
    with pytest.raises(
        CheckpointError, match=r"holds checkpoints of format 3 \(an older trainer\); this trainer resumes format 4"
    ):
        _manager(tmp_path).newest()


@pytest.mark.parametrize(
    "failing_fsync",
    [
        pytest.param(1, id="the payload's"),
        pytest.param(2, id="its directory's, the payload in place"),
        pytest.param(3, id="the manifest's"),
    ],
)
def test_disk_full_keeps_the_previous_checkpoint_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_fsync: int
) -> None:
    """No payload is left without its manifest, whichever write the disk refuses."""
    manager = _manager(tmp_path)
    manager.save(10, _state(10))
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    fsyncs: list[int] = []

    def full_from_the_nth(fd: int) -> None:
        fsyncs.append(fd)
        if len(fsyncs) >= failing_fsync:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_from_the_nth)
    with pytest.raises(
        CheckpointError,
        match=r"^could not write checkpoint .*step-000000020.pt \(No space left on device\); step 10 is kept$",
    ):
        manager.save(20, _state(20))
    monkeypatch.undo()
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before
    newest = manager.newest()
    assert newest is not None and newest.step == 10


def test_disk_full_on_the_first_checkpoint_says_none_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(
        CheckpointError,
        match=r"^could not write checkpoint .*step-000000010.pt \(No space left on device\); "
        r"no earlier checkpoint exists$",
    ):
        _manager(tmp_path).save(10, _state(10))
    assert list(tmp_path.iterdir()) == []
