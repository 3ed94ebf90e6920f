"""Accuracy: per epoch during training (sharded over ranks) and the `evaluate` command."""

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from eks_ddp.trainer import datasets, models, precision
from eks_ddp.trainer.errors import UsageError
from eks_ddp.trainer.outputs import load_model_file, write_json

log = logging.getLogger(__name__)


@torch.no_grad()
def predict(
    model: nn.Module, images: torch.Tensor, batch_size: int, compute: str, device: torch.device
) -> torch.Tensor:
    """Predicted class of every image (on the CPU); leaves the model in train mode."""
    model.eval()
    predictions = []
    try:
        for start in range(0, len(images), batch_size):
            batch = images[start : start + batch_size].to(device, non_blocking=True)
            with precision.autocast(compute, device):
                predictions.append(model(batch).argmax(dim=1).cpu())
    finally:
        model.train()
    return torch.cat(predictions) if predictions else torch.empty(0, dtype=torch.long)


@dataclass(frozen=True)
class Report:
    accuracy: float
    per_class: dict[str, float]
    matrix: np.ndarray

    def lines(self) -> list[str]:
        """The workshop's wording, so users can compare line by line."""
        return [f"Accuracy of the network on the {int(self.matrix.sum())} test images: {100 * self.accuracy:.1f} %"] + [
            f"Accuracy for class: {name:5s} is {100 * value:.1f} %" for name, value in self.per_class.items()
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            "accuracy": self.accuracy,
            "per_class_accuracy": self.per_class,
            "confusion_matrix": self.matrix.tolist(),
        }


def report(predictions: torch.Tensor, labels: torch.Tensor, classes: tuple[str, ...]) -> Report:
    # sklearn.metrics.confusion_matrix's layout (true class by row), counted with NumPy: importing scikit-learn would
    # cost every training rank a second, and training reports per epoch through here.
    count = len(classes)
    matrix = np.bincount(labels.numpy() * count + predictions.numpy(), minlength=count * count).reshape(count, count)
    totals = matrix.sum(axis=1)
    per_class = {
        name: float(matrix[index, index] / totals[index]) if totals[index] else 0.0
        for index, name in enumerate(classes)
    }
    return Report(accuracy=float(np.trace(matrix) / max(1, matrix.sum())), per_class=per_class, matrix=matrix)


def evaluate_command(
    model_file: Path,
    dataset: str | None,
    data_dir: Path | None,
    json_path: Path | None,
    matrix_path: Path | None,
    batch_size: int,
    run_name: str | None = None,
) -> Report:
    document = load_model_file(model_file)
    metadata = document["metadata"]
    if run_name is not None and metadata.get("run") != run_name:
        raise UsageError(
            f"--model-file {model_file} was written by run {metadata.get('run')}, not --run-name {run_name}"
        )
    dataset = dataset or str(metadata["dataset"])
    synthetic = datasets.SyntheticShape(**metadata["synthetic"]) if "synthetic" in metadata else None
    splits = datasets.load(dataset, data_dir, synthetic, seed=int(metadata.get("seed", 0)))
    if tuple(splits.input_shape) != tuple(metadata["input_shape"]) or len(splits.classes) != len(metadata["classes"]):
        raise UsageError(
            f"--model-file {model_file} was trained on {metadata['dataset']} "
            f"({len(metadata['classes'])} classes, images {tuple(metadata['input_shape'])}); "
            f"--dataset {dataset} has {len(splits.classes)} classes, images {splits.input_shape}"
        )
    model = models.build(metadata["model"], splits.input_shape, len(splits.classes))
    try:
        model.load_state_dict(document["state_dict"])
    except RuntimeError:  # its layers are not this trainer's model of that name (CHANGELOG: workshop-cnn)
        raise UsageError(
            f"--model-file {model_file}: its weights do not fit this trainer's {metadata['model']} "
            "(saved by an older trainer whose layers differ); train the model again with this one"
        ) from None
    device = torch.device("cpu")
    compute = precision.resolve(str(metadata.get("precision", "auto")), device)  # as training measured it
    images = splits.test_x.contiguous(memory_format=models.memory_format(metadata["model"]))
    result = report(predict(model, images, batch_size, compute, device), splits.test_y, tuple(metadata["classes"]))
    for line in result.lines():
        print(line)
    matrix_path = matrix_path or model_file.with_name("confusion-matrix.png")
    from eks_ddp.trainer import plots  # matplotlib, for the evaluation only

    plots.confusion_matrix(result.matrix, tuple(metadata["classes"]), matrix_path)
    print(f"Confusion matrix: {matrix_path}")
    if json_path is not None:
        write_json(
            json_path,
            {"model_file": str(model_file), "run": metadata.get("run"), "dataset": dataset, **result.as_json()},
        )
        print(f"Report: {json_path}")
    return result
