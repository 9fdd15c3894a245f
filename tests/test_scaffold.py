"""SCAFFOLD (option II, control variates in gradient units) on quadratic clients: known updates, exact convergence
where FedAvg drifts under plain SGD, momentum and Adam, c = mean_i c_i; on the engine: option II's printed formula
for plain SGD, loop == vmap for the measured mean gradients."""

import pytest
import torch

from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import RoundContext
from fedavail.engine.client_data import ClientData
from fedavail.engine.local import ClientTrainer
from fedavail.engine.optim import LocalOptimizer
from fedavail.engine.params import FlatModel
from fedavail.models import build_model
from fedavail.plan.experiments import AugmentationOptions
from fedavail.plan.local import resolve_local
from fedavail.rng import torch_generator

import numpy as np

from quadratic import curved_local_train, quadratic_local_train, run_round, simulate, sqrt_decay
from synthetic import image_dataset

TARGETS = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 1.0], [2.0, 2.0]], dtype=torch.float64)
# Diagonal curvatures a_i: F_i(x) = ½ Σ_k a_ik (x_k − u_ik)², minimised by x*_k = Σ_i a_ik u_ik / Σ_i a_ik.
CURVATURES = torch.tensor([[1.0, 0.2], [0.2, 1.0], [3.0, 0.5], [0.5, 2.0]], dtype=torch.float64)
MINIMISER = (CURVATURES * TARGETS).sum(0) / CURVATURES.sum(0)


def context(t: int, available: torch.Tensor, lr: float, steps: int) -> RoundContext:
    return RoundContext(round=t, available=available, prob=None, snapshot=None, lr=lr,
                        generator=torch_generator(0, "algorithm", t))


def run_full_participation(name: str, rounds: int, steps: int, lr, local: dict | None = None,
                           available: torch.Tensor | None = None) -> torch.Tensor:
    """`local`: the engine's local optimisation block (plain SGD when None); `lr` a float or a function of the
    round; `available` bool [rounds, 4] (everyone when None)."""
    algorithm = build_algorithm(name, {})
    state = algorithm.init_state(torch.zeros(2, dtype=torch.float64), torch.ones(4, dtype=torch.int64))
    optimizer, rows = None, None
    if local is not None:
        options = resolve_local({"lr": 1.0, "steps": steps, "batch_size": 1, **local}, None, "training.local")
        optimizer = LocalOptimizer(options)
        if options.optimizer_state == "persistent":
            rows = optimizer.init_rows(4, 2, torch.float64, torch.device("cpu"))
    local_train = curved_local_train(CURVATURES, TARGETS, steps, optimizer, rows)
    for t in range(rounds):
        everyone = torch.ones(4, dtype=torch.bool) if available is None else available[t]
        step_lr = lr(t) if callable(lr) else lr
        state, _, _ = run_round(algorithm, state, context(t, everyone, step_lr, steps), local_train)
    return state["x"]


def test_one_local_step_full_participation_is_gradient_descent_on_the_average():
    # With one step, option II gives c_i = ∇F_i(x^{t−1}) and the mean correction cancels: plain GD, also under LR
    # decay (option II divides by the current η_l).
    available = torch.ones(8, 4, dtype=torch.bool)
    lr = sqrt_decay(0.3)
    _, history = simulate(build_algorithm("scaffold", {}), TARGETS, available, steps=1, lr=lr)
    x = torch.zeros(2, dtype=torch.float64)
    for t, record in enumerate(history):
        x = x - lr(t) * (x - TARGETS.mean(0))
        torch.testing.assert_close(record["x"], x)


def test_one_round_control_variates_match_option_two():
    # From zero state: y_s − u = (1 − η)^s (x − u), so c_i⁺ = (x − y)/(sη) = (1 − (1 − η)^s)(x − u_i)/(sη).
    steps, lr, x0 = 5, 0.2, torch.tensor([0.5, -1.0], dtype=torch.float64)
    available = torch.tensor([[True, False, True, True]])
    state, _ = simulate(build_algorithm("scaffold", {"global_lr": 2.0}), TARGETS, available, steps, lr, x0=x0)
    shrink = 1 - (1 - lr) ** steps
    expected_ci = torch.zeros(4, 2, dtype=torch.float64)
    expected_ci[[0, 2, 3]] = shrink * (x0 - TARGETS[[0, 2, 3]]) / (steps * lr)
    torch.testing.assert_close(state["c_i"], expected_ci)
    torch.testing.assert_close(state["c"], expected_ci.sum(0) / 4)  # 1/N, not |S|/N per Δc_i
    torch.testing.assert_close(state["x"], x0 + 2.0 * (shrink * (TARGETS[[0, 2, 3]] - x0)).mean(0))


def test_correction_is_c_minus_c_i():
    algorithm = build_algorithm("scaffold", {})
    state = {"x": torch.zeros(2), "c": torch.tensor([1.0, 2.0]), "c_i": torch.arange(8.0).reshape(4, 2)}
    clients = torch.tensor([1, 3])
    correction = algorithm.correction(state, clients, context(0, torch.ones(4, dtype=torch.bool), 0.1, 1))
    assert correction.prox_mu == 0.0
    torch.testing.assert_close(correction.drift, torch.tensor([[-1.0, -1.0], [-5.0, -5.0]]))


def test_many_local_steps_identical_curvature_converges_to_the_mean_target():
    available = torch.ones(200, 4, dtype=torch.bool)
    state, _ = simulate(build_algorithm("scaffold", {}), TARGETS, available, steps=10, lr=0.05)
    torch.testing.assert_close(state["x"], TARGETS.mean(0), rtol=0, atol=1e-10)


def test_many_local_steps_heterogeneous_clients_scaffold_is_exact_where_fedavg_drifts():
    # With F_i = ½‖x − u_i‖² all Hessians are equal and FedAvg has no client drift; heterogeneous curvatures give it
    # one. SCAFFOLD's fixed point is the true minimiser; FedAvg's is not.
    scaffold = run_full_participation("scaffold", rounds=100, steps=10, lr=0.1)
    fedavg = run_full_participation("fedavg", rounds=100, steps=10, lr=0.1)
    torch.testing.assert_close(scaffold, MINIMISER, rtol=0, atol=1e-10)
    assert (fedavg - MINIMISER).norm() > 0.1


@pytest.mark.parametrize("local, lr", [
    ({"optimizer": "momentum", "momentum": 0.9, "optimizer_state": "reset"}, 0.02),
    ({"optimizer": "momentum", "momentum": 0.9, "optimizer_state": "persistent"}, 0.02),
    ({"optimizer": "adam", "optimizer_state": "reset"}, lambda t: 0.05 / (t / 10 + 1)),
    ({"optimizer": "adam", "optimizer_state": "persistent"}, lambda t: 0.05 / (t / 10 + 1)),
], ids=["momentum-reset", "momentum-persistent", "adam-reset", "adam-persistent"])
def test_scaffold_reaches_the_minimiser_under_momentum_and_adam_where_fedavg_stays_biased(local, lr):
    # Control variates in gradient units: at the minimiser each client's corrected gradient is zero whatever the
    # optimizer does with it, so x* is a fixed point. (The printed option II, (x − y)/(sη), diverged here under
    # momentum and mis-scaled c_i under Adam.) Adam restarted every round takes sign-like first steps of size η, so
    # there the LR decays as 1/t. Half the clients take part each round, alternating.
    available = torch.tensor([[True, False, True, False], [False, True, False, True]]).repeat(300, 1)
    scaffold = run_full_participation("scaffold", 600, 10, lr, local, available)
    fedavg = run_full_participation("fedavg", 600, 10, lr, local, available)
    assert (scaffold - MINIMISER).norm() < 1e-3
    assert (fedavg - MINIMISER).norm() > 0.1


def _engine_round(batched: bool, local: dict, drift_scale: float = 0.01):
    """One SCAFFOLD-shaped round of the engine in float64: four clients of a small CNN with a drift c − c_i."""
    dataset = image_dataset()
    model = FlatModel(build_model("small_cnn", dataset, seed=0).to(torch.float64))
    indices = np.random.default_rng(0).permutation(len(dataset["train_y"]))
    offsets = np.linspace(0, len(indices), 11).astype(np.int64)
    data = ClientData(dataset, offsets, indices, torch.device("cpu"), AugmentationOptions(), torch.float64)
    work = {} if "epochs" in local else {"steps": 4}
    options = resolve_local({"lr": 0.05, "batch_size": 8, **work, **local}, None, "training.local")
    trainer = ClientTrainer(model, data, options, seed=5, batched=batched)
    state = trainer.init_state(data.num_clients, torch.float64, torch.device("cpu"))
    clients = torch.tensor([1, 4, 6, 9])
    drift = drift_scale * torch.randn(4, model.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    scaffold = build_algorithm("scaffold", {})
    sgd_state = {"x": model.flatten(), "c": drift.mean(0), "c_i": torch.zeros(10, model.dim, dtype=torch.float64)}
    sgd_state["c_i"][clients] = sgd_state["c"] - drift
    correction = scaffold.correction(sgd_state, clients, None)
    result = trainer.train(clients, model.flatten().expand(4, -1), correction, 3, 0.05, state)
    return result, sgd_state, clients


@pytest.mark.parametrize("batched", [False, True], ids=["loop", "vmap"])
def test_gradient_unit_control_variates_equal_printed_option_two_under_plain_sgd(batched):
    # c_i⁺ = c_i − c + (x − y)/(s η) for s plain SGD steps of size η, against the engine's mean raw gradient.
    result, state, clients = _engine_round(batched, {})
    printed = state["c_i"][clients] - state["c"] + (result.start - result.end) / (result.steps[:, None].double() * 0.05)
    torch.testing.assert_close(result.mean_gradient, printed, rtol=0, atol=1e-12)
    assert result.mean_gradient.abs().max() > 1e-3


@pytest.mark.parametrize("local", [
    {"optimizer": "momentum", "optimizer_state": "persistent"},
    {"optimizer": "adam", "lr": 1e-3, "optimizer_state": "reset"},
    {"optimizer": "adam", "lr": 1e-3, "optimizer_state": "persistent", "epochs": 1, "max_steps": 3},
], ids=["momentum-persistent", "adam-reset", "adam-epochs"])
def test_mean_gradient_loop_equals_vmap_in_float64(local):
    (loop, _, _), (vmap, _, _) = _engine_round(False, local), _engine_round(True, local)
    torch.testing.assert_close(vmap.end, loop.end, rtol=0, atol=1e-12)
    torch.testing.assert_close(vmap.mean_gradient, loop.mean_gradient, rtol=0, atol=1e-12)


def test_c_stays_the_mean_of_the_client_control_variates_under_partial_participation():
    generator = torch.Generator().manual_seed(3)
    available = torch.rand(30, 6, generator=generator) < 0.4
    targets = torch.randn(6, 3, generator=generator, dtype=torch.float64)
    algorithm = build_algorithm("scaffold", {})
    state = algorithm.init_state(torch.zeros(3, dtype=torch.float64), torch.ones(6, dtype=torch.int64))
    local_train = quadratic_local_train(targets, steps=4)
    seen = torch.zeros(6, dtype=torch.bool)
    lr = sqrt_decay(0.2)
    for t in range(len(available)):
        before = state["c_i"].clone()
        state, clients, _ = run_round(algorithm, state, context(t, available[t], lr(t), 4), local_train)
        torch.testing.assert_close(state["c"], state["c_i"].mean(0), rtol=0, atol=1e-12)
        idle = torch.ones(6, dtype=torch.bool)
        idle[clients] = False
        assert torch.equal(state["c_i"][idle], before[idle])  # stale c_i for clients outside S_t
        seen |= ~idle
    assert seen.all() and not available.all(1).any()


def test_no_participants_means_no_update():
    available = torch.zeros(3, 4, dtype=torch.bool)
    state, _ = simulate(build_algorithm("scaffold", {}), TARGETS, available, steps=3, lr=0.1)
    assert all(torch.equal(v, torch.zeros_like(v)) for v in state.values())


def test_state_is_x_c_and_one_table():
    state = build_algorithm("scaffold", {}).init_state(torch.ones(5), torch.ones(7, dtype=torch.int64))
    assert {k: tuple(v.shape) for k, v in state.items()} == {"x": (5,), "c": (5,), "c_i": (7, 5)}
    assert not state["c"].any() and not state["c_i"].any()


def test_unknown_hyperparameter_is_named():
    with pytest.raises(ValueError, match="mu"):
        build_algorithm("scaffold", {"mu": 0.1})
