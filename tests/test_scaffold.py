"""SCAFFOLD (option II) on quadratic clients: known updates, exact convergence where FedAvg drifts, c = mean_i c_i."""

import pytest
import torch

from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import RoundContext, run_round
from fedavail.engine.local import LocalResult
from fedavail.rng import torch_generator

from quadratic import quadratic_local_train, simulate, sqrt_decay

TARGETS = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 1.0], [2.0, 2.0]], dtype=torch.float64)
# Diagonal curvatures a_i: F_i(x) = ½ Σ_k a_ik (x_k − u_ik)², minimised by x*_k = Σ_i a_ik u_ik / Σ_i a_ik.
CURVATURES = torch.tensor([[1.0, 0.2], [0.2, 1.0], [3.0, 0.5], [0.5, 2.0]], dtype=torch.float64)


def context(t: int, available: torch.Tensor, lr: float, steps: int) -> RoundContext:
    return RoundContext(round=t, available=available, prob=None, snapshot=None, lr=lr,
                        generator=torch_generator(0, "algorithm", t))


def curved_local_train(curvatures: torch.Tensor, targets: torch.Tensor, steps: int):
    """Exact local gradient descent on ½ Σ_k a_ik (x_k − u_ik)² (with the algorithm's gradient correction)."""

    def local_train(clients, starts, correction, ctx):
        weights = starts.clone()
        for _ in range(steps):
            gradient = curvatures[clients] * (weights - targets[clients])
            if correction is not None:
                gradient = correction.apply(gradient, weights)
            weights = weights - ctx.lr * gradient
        zeros = torch.zeros(len(clients), dtype=torch.float64)
        return LocalResult(starts, weights, zeros, zeros, torch.full((len(clients),), steps))

    return local_train


def run_full_participation(name: str, rounds: int, steps: int, lr: float) -> torch.Tensor:
    algorithm = build_algorithm(name, {})
    state = algorithm.init_state(torch.zeros(2, dtype=torch.float64), torch.ones(4, dtype=torch.int64))
    local_train = curved_local_train(CURVATURES, TARGETS, steps)
    for t in range(rounds):
        state, _, _ = run_round(algorithm, state, context(t, torch.ones(4, dtype=torch.bool), lr, steps), local_train)
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
    minimiser = (CURVATURES * TARGETS).sum(0) / CURVATURES.sum(0)
    scaffold = run_full_participation("scaffold", rounds=100, steps=10, lr=0.1)
    fedavg = run_full_participation("fedavg", rounds=100, steps=10, lr=0.1)
    torch.testing.assert_close(scaffold, minimiser, rtol=0, atol=1e-10)
    assert (fedavg - minimiser).norm() > 0.1


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
