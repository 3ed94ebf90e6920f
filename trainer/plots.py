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
    """Counts by true class (rows) and predicted class, drawn as scikit-learn's ConfusionMatrixDisplay draws them (its
    colours, and each count in the colour that reads on its cell); drawn here, since importing sklearn.metrics cost
    every evaluation 1.6 CPU-seconds."""
    size = len(classes)
    figure, axis = plt.subplots(figsize=(1 + 0.7 * size, 1 + 0.6 * size))
    image = axis.imshow(matrix, interpolation="nearest", cmap="viridis")
    darkest, lightest = image.cmap(0), image.cmap(1.0)
    middle = (matrix.max() + matrix.min()) / 2
    for (row, column), count in np.ndenumerate(matrix):
        axis.text(column, row, f"{count:d}", ha="center", va="center", color=lightest if count < middle else darkest)
    axis.set(xticks=range(size), yticks=range(size), xticklabels=list(classes), yticklabels=list(classes),
             xlabel="Predicted label", ylabel="True label", title="Confusion matrix (rows: true class)")
    _save(figure, path)
