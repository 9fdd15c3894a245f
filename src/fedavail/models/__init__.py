"""Model registry: a config names a model; the dataset supplies its input shape and class count; the architecture
says how its paper initialises it.

Initialisations (each drawn from the generator keyed by the run's seed, never the global RNG):
  - "kaiming_normal": conv and linear weights Kaiming (He) normal, biases zero, as FedSWE App. H states;
  - "pytorch_default": PyTorch's own reset_parameters rules, what the FAST authors' code
    (github.com/RogerRogerUSC/FAST) gets by not initialising: conv/linear weights Kaiming uniform with a = √5, biases
    U(±1/√fan_in), embeddings N(0, 1), LSTM weights U(±1/√hidden)."""

import math
from collections import namedtuple

import torch
from torch import nn

from fedavail.models import cnn
from fedavail.models.lstm import CharLSTM
from fedavail.plan.names import MODEL_KINDS, MODEL_NAMES
from fedavail.rng import torch_generator

Architecture = namedtuple("Architecture", "build init")  # init: kaiming_normal | pytorch_default

ARCHITECTURES = {
    "fedswe_svhn_cnn": Architecture(cnn.fedswe_svhn_cnn, "kaiming_normal"),
    "fedswe_cifar10_cnn": Architecture(cnn.fedswe_cifar10_cnn, "kaiming_normal"),
    "fedswe_cinic10_cnn": Architecture(cnn.fedswe_cinic10_cnn, "kaiming_normal"),
    "fast_cnn_fmnist": Architecture(cnn.fast_cnn_fmnist, "pytorch_default"),
    "fast_cnn_cifar10": Architecture(cnn.fast_cnn_cifar10, "pytorch_default"),
    "fast_char_lstm": Architecture(CharLSTM, "pytorch_default"),
    "small_cnn": Architecture(cnn.small_cnn, "kaiming_normal"),
}


def _initialise(module: nn.Module, init: str, generator: torch.Generator) -> None:
    """pytorch_default makes the same draws, in the same order, as each module's reset_parameters()."""
    if isinstance(module, (nn.Conv2d, nn.Linear)):
        if init == "kaiming_normal":
            nn.init.kaiming_normal_(module.weight, nonlinearity="relu", generator=generator)
            nn.init.zeros_(module.bias)
        else:
            nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
            bound = 1.0 / math.sqrt(module.weight[0].numel())
            nn.init.uniform_(module.bias, -bound, bound, generator=generator)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, generator=generator)
    elif isinstance(module, nn.LSTM):
        bound = 1.0 / module.hidden_size**0.5
        for weight in module.parameters():
            nn.init.uniform_(weight, -bound, bound, generator=generator)


def build_model(name: str, dataset: dict, seed: int) -> nn.Module:
    """Model `name` for a prepared dataset, initialised as its architecture says from a generator keyed by the seed."""
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown model {name!r}; known: {MODEL_NAMES}")
    architecture, kind = ARCHITECTURES[name], MODEL_KINDS[name]
    if dataset["kind"] != kind:
        raise ValueError(f"model {name!r} needs a {kind} dataset, {dataset['name']!r} is {dataset['kind']}")
    if kind == "image":
        _, channels, height, _ = dataset["train_x"].shape
        model = architecture.build(in_channels=channels, num_classes=dataset["num_classes"], image_size=height)
    else:
        model = architecture.build(vocab_size=dataset["num_classes"])
    generator = torch_generator(seed, "model-init")
    with torch.no_grad():
        for module in model.modules():
            _initialise(module, architecture.init, generator)
    return model
