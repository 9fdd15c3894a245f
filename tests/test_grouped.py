"""The grouped back end (fedavail.engine.grouped) computes each client's loss gradient as torch.func's vmap(grad) does,
for every layer kind it supports, with padded (weight-0) samples; models it does not support are named."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import grad, vmap

from fedavail.engine import grouped
from fedavail.engine.params import FlatModel
from fedavail.models import build_model

from synthetic import image_dataset


def _reference(model, weights, x, y, sample_weights):
    def loss(client_weights, inputs, labels, w):
        losses = F.cross_entropy(model(client_weights, inputs), labels, reduction="none")
        return (losses * w).sum() / w.sum().clamp_min(1)

    return vmap(grad(loss))(weights, x, y, sample_weights)


def _pooled_mlp_head():
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 5, 3, stride=2, dilation=1), nn.ReLU(), nn.Flatten(), nn.Linear(5, 7, bias=False),
                         nn.ReLU(), nn.Linear(7, 3))


@pytest.mark.parametrize("build, shape", [
    (lambda: build_model("small_cnn", image_dataset(size=28), 0), (1, 28, 28)),
    (lambda: build_model("fedswe_svhn_cnn", image_dataset(size=32, channels=3, train=20, test=10), 0), (3, 32, 32)),
    (_pooled_mlp_head, (3, 8, 8)),  # no biases in some layers, a strided unpadded convolution
])
@pytest.mark.parametrize("channels_last", [True, False])
def test_each_clients_gradient_equals_vmap_grad_in_float64(build, shape, channels_last):
    torch.manual_seed(0)
    model = FlatModel(build().double(), channels_last=channels_last)
    assert grouped.supports(model)
    clients, batch = 3, 6
    weights = model.flatten().expand(clients, -1) + 0.05 * torch.randn(clients, model.dim, dtype=torch.float64)
    x = torch.randn(clients, batch, *shape, dtype=torch.float64)
    y = torch.randint(0, 3, (clients, batch))
    sample_weights = torch.ones(clients, batch, dtype=torch.float64)
    sample_weights[1, 4:] = 0  # a partial batch, padded
    gradient, logits = grouped.loss_gradient(model, weights, x, y, sample_weights)
    torch.testing.assert_close(gradient, _reference(model, weights, x, y, sample_weights), rtol=0, atol=1e-13)
    torch.testing.assert_close(logits, vmap(model)(weights, x), rtol=0, atol=1e-13)


def test_models_with_dropout_or_lstm_keep_vmap():
    dataset = image_dataset(size=32, channels=3, train=20, test=10)
    assert not grouped.supports(FlatModel(build_model("fedswe_cinic10_cnn", dataset, 0)))  # dropout
    text = {"name": "t", "kind": "text", "num_classes": 80, "train_x": torch.zeros(4, 80, dtype=torch.int64)}
    assert not grouped.supports(FlatModel(build_model("fast_char_lstm", text, 0)))
    assert not grouped.supports(FlatModel(nn.Sequential(nn.Conv2d(4, 4, 3, groups=2), nn.Flatten())))
