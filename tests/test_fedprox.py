"""FedProx on quadratic clients, where local training with the proximal term has a closed form."""

import pytest
import torch

from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import RoundContext
from fedavail.rng import torch_generator

from quadratic import simulate

TARGETS = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 1.0], [2.0, 2.0]], dtype=torch.float64)


@pytest.mark.parametrize("mu", [0.0, 1.0])
def test_one_local_step_full_participation_is_gradient_descent_on_the_average(mu):
    # One step from the anchor: w − x^t = 0, so the proximal term vanishes whatever μ.
    available = torch.ones(6, 4, dtype=torch.bool)
    _, history = simulate(build_algorithm("fedprox", {"mu": mu}), TARGETS, available, steps=1, lr=0.3)
    x = torch.zeros(2, dtype=torch.float64)
    for record in history:
        x = x - 0.3 * (x - TARGETS.mean(0))
        torch.testing.assert_close(record["x"], x)


@pytest.mark.parametrize("mu", [0.0, 0.1, 2.0])
def test_one_round_matches_the_closed_form(mu):
    # s steps of w <- w − η((w − u) + μ(w − x)) from w = x: w_s − w* = ρ^s (x − w*) with ρ = 1 − η(1 + μ) and
    # w* = (u + μx)/(1 + μ), so Δ = (1 − ρ^s)(u − x)/(1 + μ).
    steps, lr, x0 = 7, 0.2, torch.tensor([0.5, -1.0], dtype=torch.float64)
    available = torch.tensor([[True, True, False, True]])
    state, _ = simulate(build_algorithm("fedprox", {"mu": mu, "global_lr": 1.5}), TARGETS, available, steps, lr,
                        x0=x0)
    rho = 1 - lr * (1 + mu)
    deltas = (1 - rho**steps) * (TARGETS[[0, 1, 3]] - x0) / (1 + mu)
    torch.testing.assert_close(state["x"], x0 + 1.5 * deltas.mean(0))


def test_large_mu_moves_less_per_round_than_small_mu():
    available = torch.ones(1, 4, dtype=torch.bool)
    moves = {}
    for mu in (0.01, 1.0, 10.0):
        state, _ = simulate(build_algorithm("fedprox", {"mu": mu}), TARGETS + 5.0, available, steps=10, lr=0.05)
        moves[mu] = state["x"].norm().item()
    assert moves[10.0] < 0.5 * moves[1.0] and moves[1.0] < 0.9 * moves[0.01]


def test_anchor_is_a_detached_copy_of_the_start_points():
    algorithm = build_algorithm("fedprox", {"mu": 0.5})
    state = algorithm.init_state(torch.tensor([1.0, 2.0], requires_grad=True), torch.ones(3, dtype=torch.int64))
    clients = torch.tensor([0, 2])
    ctx = RoundContext(round=0, available=torch.ones(3, dtype=torch.bool), prob=None, snapshot=None, lr=0.1,
                       generator=torch_generator(0, "algorithm", 0))
    correction = algorithm.correction(state, clients, ctx)
    starts = algorithm.start_points(state, clients, ctx)
    assert correction.prox_mu == 0.5 and correction.drift is None
    assert torch.equal(correction.anchor, starts.detach()) and not correction.anchor.requires_grad
    assert correction.anchor.untyped_storage().data_ptr() != state["x"].untyped_storage().data_ptr()
    with torch.no_grad():
        state["x"].add_(1.0)  # training the live weights must not move the anchor
    assert torch.equal(correction.anchor, torch.tensor([[1.0, 2.0], [1.0, 2.0]]))


def test_no_participants_means_no_update():
    available = torch.zeros(3, 4, dtype=torch.bool)
    state, _ = simulate(build_algorithm("fedprox", {"mu": 0.1}), TARGETS, available, steps=3, lr=0.1)
    assert torch.equal(state["x"], torch.zeros(2, dtype=torch.float64))


def test_hyperparameters_are_checked():
    with pytest.raises(ValueError, match="weighting"):
        build_algorithm("fedprox", {"weighting": "all"})
    with pytest.raises(ValueError, match="mu"):
        build_algorithm("fedprox", {"mu": -1.0})
