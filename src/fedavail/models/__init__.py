"""Model registry: a config names a model; the dataset supplies its input shape and class count."""

import torch
from torch import nn

from fedavail.models import cnn
from fedavail.models.lstm import CharLSTM

IMAGE_MODELS = {
    "fedswe_svhn_cnn": cnn.fedswe_svhn_cnn,
    "fedswe_cifar10_cnn": cnn.fedswe_cifar10_cnn,
    "fedswe_cinic10_cnn": cnn.fedswe_cinic10_cnn,
    "fast_fmnist_cnn": cnn.fast_fmnist_cnn,
    "fast_cifar10_cnn": cnn.fast_cifar10_cnn,
    "small_cnn": cnn.small_cnn,
}
TEXT_MODELS = {"char_lstm": CharLSTM}
MODEL_NAMES = sorted([*IMAGE_MODELS, *TEXT_MODELS])


def build_model(name: str, dataset: dict, seed: int) -> nn.Module:
    """Build model `name` for a prepared dataset, initialised from a generator keyed by the seed.

    Conv and linear weights use Kaiming (He) normal initialisation (FedSWE App. H), biases zero."""
    from fedavail.rng import torch_generator

    if name in IMAGE_MODELS:
        if dataset["kind"] != "image":
            raise ValueError(f"model {name!r} needs an image dataset, {dataset['name']!r} is {dataset['kind']}")
        _, channels, height, _ = dataset["train_x"].shape
        model = IMAGE_MODELS[name](in_channels=channels, num_classes=dataset["num_classes"], image_size=height)
    elif name in TEXT_MODELS:
        if dataset["kind"] != "text":
            raise ValueError(f"model {name!r} needs a text dataset, {dataset['name']!r} is {dataset['kind']}")
        model = TEXT_MODELS[name](vocab_size=dataset["num_classes"])
    else:
        raise ValueError(f"unknown model {name!r}; known: {MODEL_NAMES}")
    generator = torch_generator(seed, "model-init")
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(module.weight, nonlinearity="relu", generator=generator)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, generator=generator)
            elif isinstance(module, nn.LSTM):
                bound = 1.0 / module.hidden_size**0.5
                for weight in module.parameters():
                    nn.init.uniform_(weight, -bound, bound, generator=generator)
    return model
