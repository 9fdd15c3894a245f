"""The local optimisation block: optimizers against PyTorch's, epochs with a cap and a partial last batch, per-client
state that persists across rounds, loop == vmap with it, and the settings' validation."""

import numpy as np
import pytest
import torch

from fedavail.engine.client_data import ClientData
from fedavail.engine.local import ClientTrainer
from fedavail.engine.optim import LocalOptimizer
from fedavail.engine.params import FlatModel
from fedavail.models import build_model
from fedavail.plan.experiments import AugmentationOptions
from fedavail.plan.local import resolve_local

from synthetic import image_dataset


def _options(**values):
    return resolve_local({"lr": 0.05, **values}, None, "experiments.x.training.local")


@pytest.mark.parametrize("values, reference", [
    ({"optimizer": "momentum", "momentum": 0.9, "weight_decay": 5e-4},
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=5e-4)),
    ({"optimizer": "adam", "betas": [0.9, 0.999], "eps": 1e-8},
     lambda p: torch.optim.Adam(p, lr=0.05, betas=(0.9, 0.999), eps=1e-8)),
    ({"optimizer": "adam", "weight_decay": 1e-3}, lambda p: torch.optim.Adam(p, lr=0.05, weight_decay=1e-3)),
    ({"optimizer": "sgd", "weight_decay": 1e-2}, lambda p: torch.optim.SGD(p, lr=0.05, weight_decay=1e-2)),
])
def test_optimizer_steps_equal_pytorchs_on_a_quadratic(values, reference):
    # F(w) = ½ Σ a_k (w_k − u_k)²: 20 steps of our formula against torch.optim in float64.
    curvature = torch.tensor([1.0, 3.0, 0.2], dtype=torch.float64)
    target = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    w_ref = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    optimizer = reference([w_ref])
    ours = LocalOptimizer(_options(**values))
    w, state = torch.zeros(3, dtype=torch.float64), ours.init_rows(1, 3, torch.float64, torch.device("cpu"))
    state = {k: v[0] for k, v in state.items()}
    for _ in range(20):
        optimizer.zero_grad()
        (0.5 * (curvature * (w_ref - target) ** 2).sum()).backward()
        optimizer.step()
        ours.step_(w, curvature * (w - target), state, 0.05)
    torch.testing.assert_close(w, w_ref.detach(), rtol=0, atol=1e-12)


def _setup(dtype=torch.float64, sizes=(37, 5, 64, 20, 130), augmentation=AugmentationOptions()):
    dataset = image_dataset(train=sum(sizes))
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    indices = np.random.default_rng(1).permutation(sum(sizes))
    data = ClientData(dataset, offsets, indices, torch.device("cpu"), augmentation, dtype)
    model = FlatModel(build_model("small_cnn", dataset, seed=0).to(dtype))
    return model, data


def test_one_epoch_takes_ceil_n_over_b_capped_steps_and_the_next_participation_continues_the_epoch():
    model, data = _setup()
    trainer = ClientTrainer(model, data, _options(epochs=1, max_steps=4, batch_size=16), seed=0)
    state = trainer.init_state(data.num_clients, torch.float64, torch.device("cpu"))
    start = model.flatten().expand(5, -1)
    clients = torch.arange(5)
    sizes = data.client_sizes().tolist()
    first = trainer.train(clients, start, None, 0, 0.05, state)
    assert first.steps.tolist() == [min(-(-n // 16), 4) for n in sizes] == [3, 1, 4, 2, 4]
    # The last batch of an epoch is partial: client 0 holds 37 = 16 + 16 + 5 samples.
    plan = trainer.plan(0, 1, trainer.init_state(data.num_clients, torch.float64, torch.device("cpu")))
    assert [len(b) for b in plan.batches] == [16, 16, 5] and plan.epoch_ends == [False, False, True]
    # Client 4 (130 samples = 9 batches) took 4 of them; it continues with 4 more, then the last one.
    assert state["epoch"].tolist() == [1, 1, 1, 1, 0] and state["epoch_batch"].tolist() == [0, 0, 0, 0, 4]
    second = trainer.train(torch.tensor([4]), start[:1], None, 1, 0.05, state)
    third = trainer.train(torch.tensor([4]), start[:1], None, 2, 0.05, state)
    assert second.steps.tolist() == [4] and third.steps.tolist() == [1]
    assert state["epoch"][4] == 1 and state["epoch_batch"][4] == 0
    # Every sample of client 4 was seen exactly once in that epoch.
    order = data.epoch_order(0, 4, 0, True)
    assert sorted(order.tolist()) == sorted(data.client_positions(4).tolist())


def test_epochs_without_a_cap_pass_over_all_data_each_round():
    model, data = _setup()
    trainer = ClientTrainer(model, data, _options(epochs=2, batch_size=16), seed=0)
    state = trainer.init_state(data.num_clients, torch.float64, torch.device("cpu"))
    result = trainer.train(torch.arange(5), model.flatten().expand(5, -1), None, 0, 0.05, state)
    assert result.steps.tolist() == [2 * -(-n // 16) for n in data.client_sizes().tolist()]
    assert state["epoch"].tolist() == [2] * 5 and state["epoch_batch"].tolist() == [0] * 5


def test_running_accuracy_spans_the_epoch_and_resets_at_its_end():
    model, data = _setup()
    trainer = ClientTrainer(model, data, _options(epochs=1, max_steps=4, batch_size=16), seed=0)
    state = trainer.init_state(data.num_clients, torch.float64, torch.device("cpu"))
    start = model.flatten()[None]
    accuracies = []
    for t in range(3):  # client 4: steps 4, 4, 1 of one 9-batch epoch
        result = trainer.train(torch.tensor([4]), start, None, t, 0.0, state)  # lr 0: accuracies are comparable
        accuracies.append(result.accuracy.item() * result.steps.item())
        if t < 2:
            assert result.running_accuracy.item() == pytest.approx(sum(accuracies) / (4 * (t + 1)))
    assert result.running_accuracy.item() == pytest.approx(sum(accuracies) / 9)
    assert state["epoch_acc_batches"][4] == 0 and state["epoch_acc_sum"][4] == 0


def _two_rounds(batched, values, augmentation=AugmentationOptions()):
    model, data = _setup(augmentation=augmentation)
    trainer = ClientTrainer(model, data, _options(**values), seed=3, batched=batched)
    state = trainer.init_state(data.num_clients, torch.float64, torch.device("cpu"))
    x = model.flatten()
    results = []
    for t, clients in enumerate([torch.tensor([0, 2, 4]), torch.tensor([1, 2, 4])]):
        results.append(trainer.train(clients, x.expand(len(clients), -1), None, t, 0.05, state))
        x = results[-1].end.mean(0)
    return results, state


@pytest.mark.parametrize("values", [
    {"optimizer": "momentum", "optimizer_state": "persistent", "epochs": 1, "max_steps": 3, "batch_size": 16,
     "weight_decay": 5e-4},
    {"optimizer": "adam", "lr": 1e-3, "optimizer_state": "persistent", "epochs": 1, "max_steps": 3, "batch_size": 16},
    {"optimizer": "adam", "lr": 1e-3, "optimizer_state": "reset", "steps": 3, "batch_size": 8},
])
def test_loop_equals_vmap_in_float64_with_momentum_adam_and_persistent_state(values):
    (loop, loop_state), (vmap, vmap_state) = _two_rounds(False, values), _two_rounds(True, values)
    for a, b in zip(loop, vmap):
        torch.testing.assert_close(b.end, a.end, rtol=0, atol=1e-12)
        torch.testing.assert_close(b.loss, a.loss, rtol=0, atol=1e-12)
        assert torch.equal(a.steps, b.steps)
    assert loop_state.keys() == vmap_state.keys()
    for key in loop_state:
        torch.testing.assert_close(vmap_state[key], loop_state[key], rtol=0, atol=1e-12)


@pytest.mark.parametrize("width", [64, 2])  # the clients of unequal steps in one vmap call, or in two
def test_loop_equals_vmap_with_augmentation_and_partial_batches(width, monkeypatch):
    import fedavail.engine.local as local

    monkeypatch.setattr(local, "CPU_BATCH_WIDTH", width)
    values = {"optimizer": "momentum", "optimizer_state": "persistent", "epochs": 1, "batch_size": 16}
    augmentation = AugmentationOptions(crop_padding=2, horizontal_flip=True)
    (loop, _), (vmap, _) = _two_rounds(False, values, augmentation), _two_rounds(True, values, augmentation)
    for a, b in zip(loop, vmap):
        torch.testing.assert_close(b.end, a.end, rtol=0, atol=1e-12)


def test_persistent_momentum_changes_the_next_round_and_reset_does_not_carry_it():
    persistent, state = _two_rounds(False, {"optimizer": "momentum", "optimizer_state": "persistent", "steps": 2,
                                            "batch_size": 8})
    reset, reset_state = _two_rounds(False, {"optimizer": "momentum", "optimizer_state": "reset", "steps": 2,
                                             "batch_size": 8})
    torch.testing.assert_close(persistent[0].end, reset[0].end, rtol=0, atol=0)  # round 0: same fresh buffers
    assert not torch.allclose(persistent[1].end, reset[1].end)  # clients 2 and 4 carry their momentum
    assert set(state) == {"momentum"} and state["momentum"].shape == (5, persistent[0].end.shape[1])
    assert reset_state == {}
    assert torch.count_nonzero(state["momentum"].abs().sum(1)).item() == 4  # clients 0, 1, 2, 4 took part


@pytest.mark.parametrize("values, message", [
    ({"steps": 3, "epochs": 1}, "either steps or epochs"),
    ({"steps": 3, "max_steps": 2}, "max_steps"),
    ({"lr": float("nan")}, "experiments.x.training.local.lr: must be a finite number"),
    ({"lr": 0}, "experiments.x.training.local.lr: must be > 0"),
    ({"optimizer": "rmsprop"}, "optimizer: must be one of"),
    ({"optimizer_state": "persistent"}, "plain sgd has no state"),
    ({"milestones": [10]}, "only used by schedule 'multistep'"),
    ({"schedule": "multistep", "milestones": [10, 5]}, "increasing"),
    ({"betas": [0.9]}, "betas"),
    ({"momentum": 1.0}, "momentum: must be in "),
    ({"local_steps": 3}, "experiments.x.training.local.local_steps: unknown key"),
])
def test_bad_local_settings_name_the_key(values, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        _options(**values)


def test_lr_schedules():
    assert _options(schedule="sqrt_decay").lr_at(30) == pytest.approx(0.05 / 2)
    multistep = _options(schedule="multistep", milestones=[10, 20], gamma=0.1)
    assert [multistep.lr_at(t) for t in (9, 10, 20)] == pytest.approx([0.05, 0.005, 0.0005])
    assert resolve_local({"lr": 0.1}, 0.3, "k").lr == 0.3  # the algorithm's own lr wins
    with pytest.raises(ValueError, match="k.lr: missing"):
        resolve_local({}, None, "k")
