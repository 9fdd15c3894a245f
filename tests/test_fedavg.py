"""FedAvg's three weightings on quadratic clients, where each round's update is known exactly."""

import pytest
import torch

from fedavail.algorithms import build_algorithm

from quadratic import simulate

TARGETS = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 1.0], [2.0, 2.0]], dtype=torch.float64)


def test_one_local_step_full_participation_is_gradient_descent_on_the_average():
    available = torch.ones(5, 4, dtype=torch.bool)
    state, history = simulate(build_algorithm("fedavg", {}), TARGETS, available, steps=1, lr=0.3)
    x = torch.zeros(2, dtype=torch.float64)
    for record in history:
        x = x - 0.3 * (x - TARGETS.mean(0))
        torch.testing.assert_close(record["x"], x)


@pytest.mark.parametrize("weighting", ["active", "all", "known"])
def test_single_round_update_matches_the_formula(weighting):
    available = torch.tensor([[True, False, True, False]])
    prob = torch.tensor([[0.5, 0.9, 0.25, 0.1]], dtype=torch.float64)
    algorithm = build_algorithm("fedavg", {"weighting": weighting, "global_lr": 2.0})
    state, _ = simulate(algorithm, TARGETS, available, steps=1, lr=0.5, prob=prob)
    deltas = 0.5 * TARGETS[[0, 2]]  # one step from 0 with lr 0.5 moves halfway to u_i
    expected = {"active": deltas.mean(0), "all": deltas.sum(0) / 4,
                "known": (deltas / prob[0, [0, 2], None]).sum(0) / 4}[weighting]
    torch.testing.assert_close(state["x"], 2.0 * expected)


def test_no_participants_means_no_update():
    available = torch.zeros(3, 4, dtype=torch.bool)
    state, _ = simulate(build_algorithm("fedavg", {}), TARGETS, available, steps=3, lr=0.1)
    assert torch.equal(state["x"], torch.zeros(2, dtype=torch.float64))


def test_unknown_hyperparameter_is_named():
    with pytest.raises(ValueError, match="mu"):
        build_algorithm("fedavg", {"mu": 0.1})


@pytest.mark.parametrize("p_floor, weight", [(0.02, 50.0), (None, 100.0)])
def test_known_weighting_floors_p_or_uses_it_as_is(p_floor, weight):
    available = torch.tensor([[True, False, False, False]])
    prob = torch.tensor([[0.01, 0.5, 0.5, 0.5]], dtype=torch.float64)
    algorithm = build_algorithm("fedavg", {"weighting": "known", "p_floor": p_floor})
    state, _ = simulate(algorithm, TARGETS, available, steps=1, lr=0.5, prob=prob)
    torch.testing.assert_close(state["x"], weight * 0.5 * TARGETS[0] / 4)
