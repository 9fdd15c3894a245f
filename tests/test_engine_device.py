"""The engine on a device: keyed minibatch streams, loop == vmap, channels-last kernels (FlatModel) against the
contiguous layout. On the CPU by default; FEDAVAIL_TEST_DEVICE=cuda runs them on a GPU (benchmarks/gpu_check.sh)."""

import os

import numpy as np
import pytest
import torch

from fedavail.engine.client_data import ClientData
from fedavail.engine.local import ClientTrainer, LocalCorrection
from fedavail.engine.params import FlatModel
from fedavail.models import build_model
from fedavail.plan.experiments import AugmentationOptions
from fedavail.plan.local import LocalOptions

from synthetic import image_dataset

DEVICE = torch.device(os.environ.get("FEDAVAIL_TEST_DEVICE", "cpu"))


def _logical(model: FlatModel, vector: torch.Tensor) -> torch.Tensor:
    """A FlatModel vector in the module's own parameter order, comparable across layouts."""
    return torch.cat([t.reshape(*vector.shape[:-1], -1) for t in model.unflatten(vector).values()], dim=-1)


def _setup(name, dtype, channels_last=True, size=32, channels=3, train=120, clients=4,
           augmentation=AugmentationOptions()):
    dataset = image_dataset(train=train, test=10, size=size, channels=channels)
    model = FlatModel(build_model(name, dataset, seed=0).to(dtype), channels_last=channels_last).to(DEVICE)
    offsets = np.linspace(0, train, clients + 1).astype(np.int64)
    indices = np.random.default_rng(1).permutation(train)
    data = ClientData(dataset, offsets, indices, DEVICE, augmentation, dtype)
    return model, data


def _round(name, batched, dtype, channels_last=True, correction=None, augmentation=AugmentationOptions(), **shape):
    model, data = _setup(name, dtype, channels_last, augmentation=augmentation, **shape)
    clients = torch.tensor([0, 2, 3])
    starts = model.flatten().expand(3, -1)
    trainer = ClientTrainer(model, data, LocalOptions(lr=0.05, steps=4, batch_size=16, grad_clip=0.5), 5, batched)
    state = trainer.init_state(data.num_clients, dtype, DEVICE)
    return model, trainer.train(clients, starts, correction, 1, 0.05, state)


def test_minibatch_streams_are_keyed_on_the_device():
    _, data = _setup("small_cnn", torch.float32, size=8, channels=1)
    first = [y for _, y in data.client_stream(0, 5, 3, steps=4, batch_size=16)]
    again = [y for _, y in data.client_stream(0, 5, 3, steps=4, batch_size=16)]
    other_round = [y for _, y in data.client_stream(0, 6, 3, steps=4, batch_size=16)]
    assert all(a.device.type == DEVICE.type for a in first)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other_round))


@pytest.mark.parametrize("name, shape", [("small_cnn", {"size": 8, "channels": 1}), ("fedswe_svhn_cnn", {})])
def test_batched_equals_loop_in_float64(name, shape):
    _, loop = _round(name, False, torch.float64, **shape)
    _, batched = _round(name, True, torch.float64, **shape)
    torch.testing.assert_close(batched.end, loop.end, rtol=0, atol=1e-12)
    torch.testing.assert_close(batched.loss, loop.loss, rtol=0, atol=1e-12)


def test_batched_equals_loop_in_float32():
    # float32 sums in another order: after 4 steps the parameters differ by a few ulps of their ~0.1-1 scale.
    _, loop = _round("fedswe_svhn_cnn", False, torch.float32)
    _, batched = _round("fedswe_svhn_cnn", True, torch.float32)
    torch.testing.assert_close(batched.end, loop.end, rtol=0, atol=1e-5)


def test_batched_equals_loop_with_corrections_and_augmentation():
    model, _ = _setup("small_cnn", torch.float64, size=8, channels=1)
    generator = torch.Generator().manual_seed(0)
    anchor = torch.randn(3, model.dim, dtype=torch.float64, generator=generator).to(DEVICE)
    drift = (torch.randn(3, model.dim, dtype=torch.float64, generator=generator) * 0.01).to(DEVICE)
    correction = LocalCorrection(prox_mu=0.1, anchor=anchor, drift=drift)
    augmentation = AugmentationOptions(crop_padding=2, horizontal_flip=True)
    _, loop = _round("small_cnn", False, torch.float64, True, correction, augmentation, size=8, channels=1)
    _, batched = _round("small_cnn", True, torch.float64, True, correction, augmentation, size=8, channels=1)
    torch.testing.assert_close(batched.end, loop.end, rtol=0, atol=1e-12)


def test_kernels_are_channels_last_views_of_the_flat_buffers():
    model, _ = _setup("fedswe_svhn_cnn", torch.float32)
    kernels = [p for p in model.module.parameters() if p.dim() == 4]
    assert len(kernels) == 2
    for kernel in kernels:
        assert kernel.is_contiguous(memory_format=torch.channels_last) and not kernel.is_contiguous()
        assert kernel.grad.is_contiguous(memory_format=torch.channels_last)
    storage = model.flat.untyped_storage().data_ptr()
    assert all(p.untyped_storage().data_ptr() == storage for p in model.module.parameters())
    model.module(torch.randn(2, 3, 32, 32, device=DEVICE)).sum().backward()
    assert model.flat_grad.abs().sum() > 0


def test_both_layouts_hold_the_same_model():
    last, _ = _setup("fedswe_svhn_cnn", torch.float32)
    contiguous, _ = _setup("fedswe_svhn_cnn", torch.float32, channels_last=False)
    assert not torch.equal(last.flatten(), contiguous.flatten())
    assert torch.equal(_logical(last, last.flatten()), contiguous.flatten())
    x = torch.randn(5, 3, 32, 32, device=DEVICE)
    torch.testing.assert_close(last(last.flatten(), x), contiguous(contiguous.flatten(), x), rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_a_round_in_either_layout_ends_at_the_same_models(dtype, atol):
    # Channels-last convolutions sum in another order: float32 end points differ by ~1e-7 on their ~0.1-1 scale.
    last_model, last = _round("fedswe_svhn_cnn", False, dtype)
    contiguous_model, contiguous = _round("fedswe_svhn_cnn", False, dtype, channels_last=False)
    torch.testing.assert_close(_logical(last_model, last.end), _logical(contiguous_model, contiguous.end),
                               rtol=0, atol=atol)
    torch.testing.assert_close(last.loss, contiguous.loss, rtol=0, atol=atol)
