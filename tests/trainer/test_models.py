from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from torch import nn

from eks_ddp.trainer import models
from eks_ddp.trainer.atomic import write_atomically
from eks_ddp.trainer.checkpoint import encode
from eks_ddp.trainer.datasets import SyntheticShape
from eks_ddp.trainer.errors import UsageError
from eks_ddp.trainer.evaluation import evaluate_command


def test_workshop_cnn_has_the_workshop_layout() -> None:
    """Layer for layer the workshop's cnn_model.py (aws-distributed-training-workshop-eks 933a167): pooling, then
    batch norm, after each pair of convolutions."""
    model = models.build("workshop-cnn", (3, 32, 32), 10)
    pair = [nn.Conv2d, nn.ReLU, nn.Conv2d, nn.ReLU, nn.MaxPool2d, nn.BatchNorm2d]
    assert [type(layer) for layer in model.children()] == [*pair * 3, nn.Flatten, nn.Linear, nn.ReLU, nn.Linear]
    convolutions = [layer for layer in model.modules() if isinstance(layer, nn.Conv2d)]
    assert [layer.out_channels for layer in convolutions] == [32, 64, 128, 128, 256, 256]
    assert all(layer.kernel_size == (3, 3) for layer in convolutions)
    assert sum(isinstance(layer, nn.BatchNorm2d) for layer in model.modules()) == 3
    assert sum(isinstance(layer, nn.MaxPool2d) for layer in model.modules()) == 3
    linears = [layer for layer in model.modules() if isinstance(layer, nn.Linear)]
    assert [layer.out_features for layer in linears] == [512, 10]
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_every_model_classifies_digits_and_mnist_shapes(name: str) -> None:
    for shape in ((1, 8, 8), (1, 28, 28)) if name != "workshop-cnn" else ((3, 32, 32),):
        assert models.build(name, shape, 10)(torch.randn(3, *shape)).shape == (3, 10)


def test_auto_picks_the_dataset_default() -> None:
    assert models.resolve("auto", "cifar10") == "workshop-cnn"
    assert models.resolve("auto", "digits") == "small-cnn"
    assert models.resolve("mlp", "cifar10") == "mlp"


def test_images_too_small_for_the_model() -> None:
    with pytest.raises(UsageError, match=r"--model workshop-cnn needs images of at least 16x16 pixels, got 8x8"):
        models.build("workshop-cnn", (3, 8, 8), 10)


@pytest.mark.parametrize("name", ["mlp", "small-cnn", "workshop-cnn"])
def test_each_model_trains_on_one_image_of_its_smallest_size(name: str) -> None:
    side = models.MINIMUM_SIDE[name]
    model = models.build(name, (3, side, side), 10).train()
    model(torch.randn(1, 3, side, side).contiguous(memory_format=models.memory_format(name))).sum().backward()


def test_a_model_file_whose_layers_differ_is_refused_in_one_line(tmp_path: Path) -> None:
    """A workshop-cnn saved before it pooled ahead of its batch norm: its batch-norm weights sit at other indices."""
    older = models.build("workshop-cnn", (3, 16, 16), 10)
    shifted = {("4." + key[2:] if key.startswith("5.") else key): value for key, value in older.state_dict().items()}
    metadata = {"run": "old", "dataset": "synthetic", "model": "workshop-cnn", "classes": [str(c) for c in range(10)]}
    metadata |= {"input_shape": [3, 16, 16], "synthetic": asdict(SyntheticShape(height=16, width=16, train_size=64))}
    write_atomically(tmp_path / "model.pt", encode({"state_dict": shifted, "metadata": metadata}))
    with pytest.raises(
        UsageError, match=r"^--model-file \S+model.pt: its weights do not fit this trainer's workshop-cnn"
    ):
        evaluate_command(tmp_path / "model.pt", None, None, None, None, 64)
