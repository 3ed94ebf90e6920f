"""What a run leaves in --output-dir: model.pt, summary.json, plots (metrics: trainer.run_log).

Files a user keeps (the model, the summary) are replaced atomically, so a crash
mid-write leaves the previous version, never half a file.
"""

import json
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from eks_ddp.trainer.atomic import write_atomically
from eks_ddp.trainer.checkpoint import encode
from eks_ddp.trainer.errors import UsageError

MODEL_FILE = "model.pt"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
CURVES_FILE = "training-curves.png"
TENSORBOARD_DIR = "tensorboard"
EVENTS_PREFIX = "events.out.tfevents."
"""How TensorBoard's event files in TENSORBOARD_DIR are named."""


def ensure_writable(directory: Path, flag: str) -> None:
    """Create `directory` and prove a file can be written there, before any work starts."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        raise UsageError(f"{flag} {directory}: not writable ({error.strerror or error})") from None


def save_model(path: Path, model: nn.Module, metadata: dict[str, Any]) -> None:
    weights = {key: value.detach().cpu() for key, value in model.state_dict().items()}
    state = {"state_dict": weights, "metadata": metadata}
    write_atomically(path, encode(state))


def write_json(path: Path, document: dict[str, Any]) -> None:
    write_atomically(path, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode())


def load_model_file(path: Path) -> dict[str, Any]:
    """model.pt's state dict and metadata; UsageError naming --model-file when it is not one."""
    try:
        document = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise UsageError(f"--model-file {path}: no such file") from None
    except Exception as error:  # torch raises many kinds for a file that is not a checkpoint
        raise UsageError(f"--model-file {path}: not a model saved by this trainer ({type(error).__name__})") from None
    if not isinstance(document, dict) or "state_dict" not in document or "metadata" not in document:
        raise UsageError(f"--model-file {path}: not a model saved by this trainer (no state_dict/metadata)")
    return document
