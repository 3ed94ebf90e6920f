"""The two pictures a run produces: training curves and a confusion matrix."""

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: pods and CI have no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from eks_ddp.trainer.atomic import write_atomically  # noqa: E402


def _save(figure: Any, path: Path) -> None:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    plt.close(figure)
    write_atomically(path, buffer.getvalue())


def training_curves(history: Sequence[dict[str, Any]], path: Path) -> None:
    """Mean training loss and test accuracy per epoch."""
    epochs = [record["epoch"] for record in history]
    figure, (loss_axis, accuracy_axis) = plt.subplots(1, 2, figsize=(10, 4))
    loss_axis.plot(epochs, [record["train_loss"] for record in history], marker="o")
    loss_axis.set(title="Training loss", xlabel="epoch", ylabel="mean cross-entropy")
    accuracy_axis.plot(epochs, [100 * record["test_accuracy"] for record in history], marker="o", color="tab:green")
    accuracy_axis.set(title="Test accuracy", xlabel="epoch", ylabel="%")
    for axis in (loss_axis, accuracy_axis):
        axis.grid(alpha=0.3)
    _save(figure, path)


def confusion_matrix(matrix: np.ndarray, classes: Sequence[str], path: Path) -> None:
    from sklearn.metrics import ConfusionMatrixDisplay  # a second to import: the evaluation's alone

    figure, axis = plt.subplots(figsize=(1 + 0.7 * len(classes), 1 + 0.6 * len(classes)))
    ConfusionMatrixDisplay(matrix, display_labels=list(classes)).plot(ax=axis, colorbar=False, values_format="d")
    axis.set_title("Confusion matrix (rows: true class)")
    _save(figure, path)
