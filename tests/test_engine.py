"""The engine: flat parameters, keyed minibatches, loop == vmap, models as their layer lists."""

import numpy as np
import pytest
import torch

from fedavail.engine.client_data import ClientData
from fedavail.engine.local import ClientTrainer, LocalCorrection
from fedavail.engine.params import FlatModel
from fedavail.models import build_model
from fedavail.plan.experiments import AugmentationOptions
from fedavail.plan.local import resolve_local

from synthetic import image_dataset


def _client_data(dataset, clients=10, dtype=torch.float32, augmentation=AugmentationOptions()):
    n = len(dataset["train_y"])
    offsets = np.linspace(0, n, clients + 1).astype(np.int64)
    indices = np.random.default_rng(1).permutation(n)
    return ClientData(dataset, offsets, indices, torch.device("cpu"), augmentation, dtype)


def test_flat_model_roundtrip_and_forward_matches_module():
    dataset = image_dataset()
    module = build_model("small_cnn", dataset, seed=0)
    model = FlatModel(module)
    vector = model.flatten()
    assert vector.shape == (sum(p.numel() for p in module.parameters()),)
    x = torch.randn(4, 1, 8, 8)
    torch.testing.assert_close(model(vector, x), module(x))
    shifted = model(vector + 0.1, x)
    assert not torch.allclose(shifted, module(x))


def test_model_init_depends_only_on_seed():
    dataset = image_dataset()
    a = FlatModel(build_model("small_cnn", dataset, seed=3)).flatten()
    b = FlatModel(build_model("small_cnn", dataset, seed=3)).flatten()
    c = FlatModel(build_model("small_cnn", dataset, seed=4)).flatten()
    assert torch.equal(a, b) and not torch.equal(a, c)


def _conv(c_in, c_out, k=3):
    return c_in * c_out * k * k + c_out


def _linear(n_in, n_out):
    return n_in * n_out + n_out


@pytest.mark.parametrize("name, expected", [
    # FedSWE Table 5 layer lists on 32x32x3 inputs: two 2x2 max-pools leave 32 x 8 x 8 features.
    ("fedswe_svhn_cnn", _conv(3, 32) + _conv(32, 32) + _linear(2048, 128) + _linear(128, 10)),
    ("fedswe_cifar10_cnn", _conv(3, 32) + _conv(32, 32) + _linear(2048, 256) + _linear(256, 64) + _linear(64, 10)),
    ("fedswe_cinic10_cnn", _conv(3, 32) + _conv(32, 32) + _linear(2048, 512) + _linear(512, 256)
     + _linear(256, 10)),
    # The FAST authors' CNN_Cifar10_2: three padded 3x3 convolutions and three pools leave 64 x 4 x 4 features.
    ("fast_cnn_cifar10", _conv(3, 16) + _conv(16, 32) + _conv(32, 64) + _linear(1024, 500) + _linear(500, 10)),
])
def test_parameter_counts_match_layer_lists(name, expected):
    dataset = image_dataset(size=32, channels=3, train=20, test=10)
    assert FlatModel(build_model(name, dataset, seed=0)).dim == expected


def _text_dataset(vocab=80):
    return {"name": "t", "kind": "text", "num_classes": vocab, "train_x": torch.zeros(4, 80, dtype=torch.int64)}


def test_fast_fmnist_cnn_and_char_lstm_parameter_counts():
    # CNN_FMNIST: two unpadded 3x3 convolutions and one pool leave 64 x 12 x 12 = 9216 features; its head is 62-way.
    fmnist = image_dataset(size=28, channels=1, train=20, test=10)
    assert FlatModel(build_model("fast_cnn_fmnist", fmnist, 0)).dim == (
        _conv(1, 32) + _conv(32, 64) + _linear(9216, 128) + _linear(128, 62))
    lstm = 4 * (256 * 8 + 256 * 256 + 2 * 256) + 4 * (256 * 256 + 256 * 256 + 2 * 256)
    assert FlatModel(build_model("fast_char_lstm", _text_dataset(), 0)).dim == 80 * 8 + lstm + _linear(256, 80)


def test_fast_models_output_shapes_and_the_62_way_head():
    fmnist = image_dataset(size=28, channels=1, train=20, test=10)
    assert fmnist["num_classes"] == 10
    assert build_model("fast_cnn_fmnist", fmnist, 0).eval()(torch.zeros(3, 1, 28, 28)).shape == (3, 62)
    cifar = image_dataset(size=32, channels=3, train=20, test=10)
    assert build_model("fast_cnn_cifar10", cifar, 0).eval()(torch.zeros(3, 3, 32, 32)).shape == (3, 10)
    tokens = torch.zeros(3, 80, dtype=torch.int64)
    assert build_model("fast_char_lstm", _text_dataset(), 0).eval()(tokens).shape == (3, 80)
    with pytest.raises(ValueError, match="62 outputs"):
        build_model("fast_cnn_fmnist", {**fmnist, "num_classes": 100}, 0)


@pytest.mark.parametrize("name, dataset", [
    ("fast_cnn_fmnist", image_dataset(size=28, channels=1, train=20, test=10)),
    ("fast_cnn_cifar10", image_dataset(size=32, channels=3, train=20, test=10)),
    ("fast_char_lstm", _text_dataset()),
])
def test_fast_models_get_pytorch_default_init_from_the_seeded_generator(name, dataset):
    # The same values PyTorch's own reset_parameters draws from a global generator seeded like ours.
    from fedavail.models import ARCHITECTURES
    from fedavail.rng import torch_generator

    assert ARCHITECTURES[name].init == "pytorch_default"
    ours = build_model(name, dataset, seed=5)
    reference = build_model(name, dataset, seed=6)
    with torch.random.fork_rng():
        torch.manual_seed(torch_generator(5, "model-init").initial_seed())
        for module in reference.modules():
            if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear, torch.nn.Embedding, torch.nn.LSTM)):
                module.reset_parameters()
    for a, b in zip(ours.parameters(), reference.parameters()):
        assert torch.equal(a, b)


def test_fedswe_models_get_kaiming_normal_init():
    from fedavail.models import ARCHITECTURES

    assert {ARCHITECTURES[n].init for n in ("fedswe_svhn_cnn", "fedswe_cifar10_cnn", "fedswe_cinic10_cnn")} == {
        "kaiming_normal"}
    model = build_model("fedswe_cinic10_cnn", image_dataset(size=32, channels=3, train=20, test=10), seed=0)
    assert all(torch.count_nonzero(m.bias) == 0 for m in model if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)))
    hidden = next(m for m in model if isinstance(m, torch.nn.Linear))
    # Linear(2048, 512): std √(2 / 2048) for Kaiming normal, 1/√(3 · 2048) for PyTorch's default
    assert hidden.in_features == 2048
    assert abs(hidden.weight.std().item() / (2 / 2048) ** 0.5 - 1) < 0.02


def test_client_minibatches_are_keyed_by_seed_round_and_client():
    data = _client_data(image_dataset())
    first = [y for _, y in data.client_stream(0, 5, 3, steps=4, batch_size=16)]
    again = [y for _, y in data.client_stream(0, 5, 3, steps=4, batch_size=16)]
    other_round = [y for _, y in data.client_stream(0, 6, 3, steps=4, batch_size=16)]
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other_round))


def test_client_with_fewer_samples_than_a_batch_still_yields_full_batches_of_its_own_data():
    dataset = image_dataset(train=40)
    data = _client_data(dataset, clients=10)  # 4 samples each
    own = set(data.indices[data.offsets[2]:data.offsets[3]].tolist())
    for x, y in data.client_stream(0, 0, 2, steps=3, batch_size=10):
        assert x.shape[0] == 10
        assert set(y.tolist()) <= {int(dataset["train_y"][i]) for i in own}


def _options(**values):
    return resolve_local({"lr": 0.05, "steps": 5, "batch_size": 16, **values}, None, "training.local")


def _trainer(model, data, batched=False, seed=11, **values):
    return ClientTrainer(model, data, _options(**values), seed, batched)


def _round(batched, dtype, correction=None, augmentation=AugmentationOptions(), **values):
    dataset = image_dataset()
    module = build_model("small_cnn", dataset, seed=0).to(dtype)
    model = FlatModel(module)
    data = _client_data(dataset, dtype=dtype, augmentation=augmentation)
    clients = torch.tensor([0, 3, 7, 9])
    starts = model.flatten().expand(4, -1)
    trainer = _trainer(model, data, batched, grad_clip=0.5, **values)
    state = trainer.init_state(data.num_clients, dtype, torch.device("cpu"))
    result = trainer.train(clients, starts, correction, 4, 0.05, state)
    return result, state


def test_batched_equals_per_client_loop_in_float64():
    (loop, _), (batched, _) = _round(False, torch.float64), _round(True, torch.float64)
    torch.testing.assert_close(batched.end, loop.end, rtol=0, atol=1e-12)
    torch.testing.assert_close(batched.loss, loop.loss, rtol=0, atol=1e-12)


def test_vmap_in_several_calls_equals_the_loop_in_float64(monkeypatch):
    import fedavail.engine.local as local

    monkeypatch.setattr(local, "CPU_BATCH_WIDTH", 3)  # four clients: two calls of two
    (loop, _), (batched, _) = _round(False, torch.float64), _round(True, torch.float64)
    torch.testing.assert_close(batched.end, loop.end, rtol=0, atol=1e-12)
    torch.testing.assert_close(batched.loss, loop.loss, rtol=0, atol=1e-12)


def test_batched_equals_per_client_loop_in_float32():
    # float32 sums in a different order: after 5 steps the parameters differ by a few ulps of their ~0.1-1 scale.
    (loop, _), (batched, _) = _round(False, torch.float32), _round(True, torch.float32)
    torch.testing.assert_close(batched.end, loop.end, rtol=0, atol=1e-5)


def test_batched_equals_loop_with_corrections_and_augmentation():
    dataset_dim = FlatModel(build_model("small_cnn", image_dataset(), 0)).dim
    anchor = torch.randn(4, dataset_dim, dtype=torch.float64)
    drift = torch.randn(4, dataset_dim, dtype=torch.float64) * 0.01
    correction = LocalCorrection(prox_mu=0.1, anchor=anchor, drift=drift)
    augmentation = AugmentationOptions(crop_padding=2, horizontal_flip=True)
    loop, _ = _round(False, torch.float64, correction, augmentation)
    batched, _ = _round(True, torch.float64, correction, augmentation)
    torch.testing.assert_close(batched.end, loop.end, rtol=0, atol=1e-12)


def test_local_training_lowers_the_loss():
    dataset = image_dataset()
    model = FlatModel(build_model("small_cnn", dataset, seed=0))
    data = _client_data(dataset, clients=1)
    trainer = _trainer(model, data, steps=40, batch_size=32)
    start = model.flatten()[None]
    result = trainer.train(torch.tensor([0]), start, None, 0, 0.05, {})
    from fedavail.engine.evaluate import evaluate
    before = evaluate(model, start[0], dataset["train_x"], dataset["train_y"], data.inputs)
    after = evaluate(model, result.end[0], dataset["train_x"], dataset["train_y"], data.inputs)
    assert after[0] < before[0] and after[1] > before[1]


def test_a_clients_result_does_not_depend_on_who_else_participates_even_with_dropout():
    dataset = image_dataset(train=200, test=10, size=32, channels=3)
    model = FlatModel(build_model("fedswe_cinic10_cnn", dataset, seed=0))
    data = _client_data(dataset)
    trainer = _trainer(model, data, seed=0, steps=2, batch_size=8, grad_clip=0.5)
    start = model.flatten()
    together = trainer.train(torch.tensor([1, 4]), start.expand(2, -1), None, 3, 0.05, {})
    alone = trainer.train(torch.tensor([4]), start.expand(1, -1), None, 3, 0.05, {})
    other_round = trainer.train(torch.tensor([4]), start.expand(1, -1), None, 4, 0.05, {})
    assert torch.equal(together.end[1], alone.end[0])
    assert not torch.equal(alone.end[0], other_round.end[0])
