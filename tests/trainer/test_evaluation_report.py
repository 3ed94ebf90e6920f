"""The evaluation report's confusion matrix is scikit-learn's, counted without importing it."""

import torch
from sklearn.metrics import confusion_matrix

from eks_ddp.trainer.evaluation import report


def test_the_matrix_is_sklearns_with_a_class_nobody_predicted_or_labelled() -> None:
    generator = torch.Generator().manual_seed(3)
    labels, predictions = (torch.randint(0, 4, (500,), generator=generator) for _ in range(2))
    classes = ("a", "b", "c", "d", "never")
    expected = confusion_matrix(labels.numpy(), predictions.numpy(), labels=list(range(len(classes))))
    result = report(predictions, labels, classes)
    assert result.matrix.tolist() == expected.tolist() and result.matrix.shape == (5, 5)
