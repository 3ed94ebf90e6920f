"""Checkpoints that survive crashes: atomic writes, integrity checks, fallback, retention.

Each checkpoint is two files in the checkpoint directory:
  step-000000120.pt    the torch.save payload
  step-000000120.json  its manifest: step, size, SHA-256 and the run's definition
Both are written to a temporary file in the same directory, fsynced and renamed;
the manifest goes last, so a checkpoint without a manifest (or whose payload does
not match it) was never finished and is skipped with a report, falling back to the
previous one. Only rank 0 calls this class; the trainer broadcasts what it loads.
"""

import hashlib
import io
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from eks_ddp.trainer.atomic import write_atomically
from eks_ddp.trainer.errors import CheckpointError

log = logging.getLogger(__name__)

FORMAT_VERSION = 4
"""2: the global batch in the progress counters, the definition keyed by the flags that set it. 3: `workshop-cnn`
pools before its batch norm, as the workshop's network does, so a format-2 run's weights no longer fit it. 4: an
epoch ends with a short step instead of one padded with repeated samples, so a format-3 position may lie past it."""
_NAME = re.compile(r"^step-(\d{9})\.json$")


@dataclass(frozen=True)
class Verified:
    """A checkpoint whose payload matched its manifest."""

    step: int
    path: Path
    payload: bytes


def encode(state: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def decode(payload: bytes) -> dict[str, Any]:
    """Tensors and plain containers only (`weights_only`): a checkpoint cannot run code."""
    return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)


class CheckpointManager:
    def __init__(self, directory: Path, definition: dict[str, Any], keep: int) -> None:
        self.directory = directory
        self.definition = definition
        """What defines the run, keyed by the flag that sets it: every resume must agree on all of it."""
        self.keep = keep

    def steps(self) -> list[int]:
        """Steps with a manifest, newest first."""
        if not self.directory.is_dir():
            return []
        found = (_NAME.match(entry.name) for entry in self.directory.iterdir())
        return sorted((int(match.group(1)) for match in found if match), reverse=True)

    def paths(self, step: int) -> tuple[Path, Path]:
        """(payload, manifest) of checkpoint `step`."""
        stem = self.directory / f"step-{step:09d}"
        return stem.with_suffix(".pt"), stem.with_suffix(".json")

    def newest(self) -> Verified | None:
        """The newest checkpoint that verifies, reporting (and skipping) broken ones.

        Raises CheckpointError if the newest readable checkpoint belongs to another run, or to an older format.
        """
        for step in self.steps():
            payload_path, manifest_path = self.paths(step)
            try:
                manifest = json.loads(manifest_path.read_text())
                payload = payload_path.read_bytes()
            except (OSError, ValueError) as error:
                log.warning("checkpoint %s is unreadable (%s); trying the previous one", payload_path, error)
                continue
            if len(payload) != manifest.get("bytes") or hashlib.sha256(payload).hexdigest() != manifest.get("sha256"):
                log.warning(
                    "checkpoint %s is corrupt or truncated (%d bytes, manifest says %s); trying the previous one",
                    payload_path,
                    len(payload),
                    manifest.get("bytes"),
                )
                continue
            if manifest.get("format") != FORMAT_VERSION:
                raise CheckpointError(
                    f"--checkpoint-dir {self.directory} holds checkpoints of format {manifest.get('format')} "
                    f"(an older trainer); this trainer resumes format {FORMAT_VERSION} only: use a new --checkpoint-dir"
                )
            self._check_definition(manifest.get("definition") or {})
            return Verified(step=step, path=payload_path, payload=payload)
        return None

    def save(self, step: int, state: dict[str, Any]) -> Path:
        """Write checkpoint `step` atomically, then keep only the newest `keep`."""
        payload = encode(state)
        payload_path, manifest_path = self.paths(step)
        manifest = {
            "format": FORMAT_VERSION,
            "step": step,
            "bytes": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(),
            "definition": self.definition,
        }
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_atomically(payload_path, payload)
            write_atomically(manifest_path, json.dumps(manifest, indent=1).encode())
        except OSError as error:
            if not manifest_path.exists():
                payload_path.unlink(missing_ok=True)
            previous = next((s for s in self.steps() if s != step), None)
            kept = f"step {previous} is kept" if previous is not None else "no earlier checkpoint exists"
            raise CheckpointError(
                f"could not write checkpoint {payload_path} ({error.strerror or error}); {kept}"
            ) from error
        self._prune()
        return payload_path

    def _check_definition(self, recorded: dict[str, Any]) -> None:
        """One line naming the first flag whose value differs from the run's, and both values."""
        for flag in sorted(recorded.keys() | self.definition.keys()):
            ours, theirs = self.definition.get(flag), recorded.get(flag)
            if ours != theirs:
                raise CheckpointError(
                    f"{flag} {_shown(ours)} does not match the run in --checkpoint-dir {self.directory}, "
                    f"started with {flag} {_shown(theirs)}; resume it with {flag} {_shown(theirs)}, "
                    "or start a new run with another --checkpoint-dir"
                )

    def _prune(self) -> None:
        for step in self.steps()[self.keep :]:
            for path in self.paths(step):
                path.unlink(missing_ok=True)


def _shown(value: object) -> str:
    return "unset" if value is None else str(value)
