"""The models the trainer knows, by name, and the default one for each dataset."""

from collections.abc import Callable
from typing import cast

import torch
from torch import nn

from eks_ddp.trainer.errors import UsageError

Shape = tuple[int, int, int]


def mlp(input_shape: Shape, classes: int) -> nn.Module:
    """Two hidden layers, no batch norm: small, fast, and exact under DDP (used to prove it)."""
    features = input_shape[0] * input_shape[1] * input_shape[2]
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(features, 256),
        nn.ReLU(inplace=True),
        nn.Linear(256, 256),
        nn.ReLU(inplace=True),
        nn.Linear(256, classes),
    )


def _conv_bn_relu(in_channels: int, out_channels: int) -> list[nn.Module]:
    return [nn.Conv2d(in_channels, out_channels, 3, padding=1), nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True)]


def small_cnn(input_shape: Shape, classes: int) -> nn.Module:
    """Two conv-BN-ReLU pairs (32, 64 channels) with max-pooling, then a 128-unit hidden layer."""
    channels, height, width = input_shape
    return nn.Sequential(
        *_conv_bn_relu(channels, 32),
        *_conv_bn_relu(32, 32),
        nn.MaxPool2d(2),
        *_conv_bn_relu(32, 64),
        *_conv_bn_relu(64, 64),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * (height // 4) * (width // 4), 128),
        nn.ReLU(inplace=True),
        nn.Linear(128, classes),
    )


def workshop_cnn(input_shape: Shape, classes: int) -> nn.Module:
    """The AWS workshop's CIFAR-10 CNN, layer for layer, so results and speed compare with its script's.

    Six 3x3 convolutions (32-64, 128-128, 256-256), each followed by ReLU; 2x2 max-pooling, then batch norm,
    after each pair; a 512-unit hidden layer. The order is the workshop's (aws-samples/aws-distributed-training-
    workshop-eks 933a167, 3-build-container/cnn_model.py): batch norm on the pooled quarter of the activations
    costs a quarter as much: 1-6 % more images/s in 2-rank fp32 runs on this project's 2-core VM.
    """
    channels, height, width = input_shape

    def pair(in_channels: int, mid_channels: int, out_channels: int) -> list[nn.Module]:
        return [
            nn.Conv2d(in_channels, mid_channels, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.BatchNorm2d(out_channels),
        ]

    return nn.Sequential(
        *pair(channels, 32, 64),
        *pair(64, 128, 128),
        *pair(128, 256, 256),
        nn.Flatten(),
        nn.Linear(256 * (height // 8) * (width // 8), 512),
        nn.ReLU(inplace=True),
        nn.Linear(512, classes),
    )


MODELS: dict[str, Callable[[Shape, int], nn.Module]] = {
    "mlp": mlp,
    "small-cnn": small_cnn,
    "workshop-cnn": workshop_cnn,
}
CONVOLUTIONAL = frozenset({"small-cnn", "workshop-cnn"})
DEFAULT_FOR_DATASET = {
    "digits": "small-cnn",
    "mnist": "small-cnn",
    "cifar10": "workshop-cnn",
    "synthetic": "workshop-cnn",
}
MINIMUM_SIDE = {"mlp": 1, "small-cnn": 4, "workshop-cnn": 16}
"""workshop-cnn's last batch norm sees an eighth of the side: from 16 pixels on, at least 2x2 values per channel, so a
micro-batch of one image (an epoch's short last step can leave a rank one) still trains."""


def resolve(model: str, dataset: str) -> str:
    """The concrete model name for `--model` (which may be `auto`)."""
    name = DEFAULT_FOR_DATASET[dataset] if model == "auto" else model
    if name not in MODELS:
        raise UsageError(f"--model {model!r} is unknown; choose from auto, {', '.join(MODELS)}")
    return name


def build(name: str, input_shape: Shape, classes: int) -> nn.Module:
    """A freshly initialised model; raises UsageError if the images are too small for it."""
    _, height, width = input_shape
    if min(height, width) < MINIMUM_SIDE[name]:
        raise UsageError(
            f"--model {name} needs images of at least {MINIMUM_SIDE[name]}x{MINIMUM_SIDE[name]} pixels, got {height}x{width}"
        )
    module = MODELS[name](input_shape, classes)
    return in_memory_format(module, memory_format(name))


def in_memory_format(module: nn.Module, layout: torch.memory_format) -> nn.Module:
    """`module.to(memory_format=layout)`: its 4-D weights and buffers in that layout, in place."""
    # Module.to takes memory_format as Tensor.to does, but torch's stubs leave that keyword out of its overloads.
    to = cast(Callable[..., nn.Module], module.to)
    return to(memory_format=layout)


def memory_format(name: str) -> torch.memory_format:
    """Channels-last for the convolutional models (oneDNN's fast layout on CPUs); the weights and every batch of
    images share it."""
    return torch.channels_last if name in CONVOLUTIONAL else torch.contiguous_format
