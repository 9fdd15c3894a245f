"""F3AST: selection among available clients only, the selection-rate EMA, the importance-weighted update."""

import pytest
import torch

from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import RoundContext
from fedavail.engine.local import LocalResult

from quadratic import quadratic_local_train, run_round, simulate

GENERATOR = torch.Generator()  # F3AST draws nothing


def context(round_index: int, available: torch.Tensor) -> RoundContext:
    return RoundContext(round=round_index, available=available, prob=None, snapshot=None, lr=0.1,
                        generator=GENERATOR)


def trace(rounds: int, m: int, p: float, seed: int) -> torch.Tensor:
    return torch.rand(rounds, m, generator=torch.Generator().manual_seed(seed)) < p


def test_never_selects_an_unavailable_client_and_fills_the_budget_when_it_can():
    m, budget = 20, 5
    available = trace(300, m, 0.2, seed=0)  # often fewer than K available
    sizes = torch.randint(1, 50, (m,), generator=torch.Generator().manual_seed(1))
    _, history = simulate(build_algorithm("f3ast", {"clients_per_round": budget}), torch.zeros(m, 1).double(),
                          available, steps=1, lr=0.1, client_sizes=sizes)
    short = 0
    for t, record in enumerate(history):
        assert all(available[t, c] for c in record["clients"])
        assert len(record["clients"]) == min(budget, int(available[t].sum()))
        short += int(available[t].sum()) < budget
    assert short > 10  # the trace does exercise rounds with fewer than K available clients


def test_rates_are_the_exact_ema_of_selection_and_track_its_frequency():
    m, budget, beta, rounds = 10, 3, 0.01, 3000
    available = trace(rounds, m, 0.5, seed=2)
    available[:, :budget] = True  # at least K available every round
    available[:, 9] &= trace(rounds, 1, 0.2, seed=3)[:, 0]  # client 9 rarely
    sizes = torch.arange(1, m + 1)
    algorithm = build_algorithm("f3ast", {"clients_per_round": budget, "beta": beta})
    state = algorithm.init_state(torch.zeros(1, dtype=torch.float64), sizes)
    local_train = quadratic_local_train(torch.zeros(m, 1, dtype=torch.float64), steps=1)
    rates = sizes.double() / sizes.sum()
    history, selected = [], torch.zeros(rounds, m, dtype=torch.float64)
    for t in range(rounds):
        state, clients, _ = run_round(algorithm, state, context(t, available[t]), local_train)
        assert len(clients) == budget
        selected[t, clients] = 1.0
        rates = (1 - beta) * rates + beta * selected[t]  # r^{t+1} = (1 − β)r^t + β·1{selected}
        torch.testing.assert_close(state["r"], rates)
        history.append(state["r"])
    # averaged past the EMA's 1/β = 100-round memory, r is each client's selection frequency
    frequency, mean_rate = selected[500:].mean(0), torch.stack(history[500:]).mean(0)
    assert frequency.max() - frequency.min() > 0.2  # selection does differ between clients
    torch.testing.assert_close(mean_rate, frequency, atol=0.005, rtol=0)
    # exactly K selected each round, so Σr moves from Σp = 1 towards K: Σr^T = K − (K − 1)(1 − β)^T
    assert state["r"].sum().item() == pytest.approx(budget - (budget - 1) * (1 - beta) ** rounds)


def test_selects_top_k_by_p_squared_over_r_squared():
    algorithm = build_algorithm("f3ast", {"clients_per_round": 2, "beta": 0.5})
    state = algorithm.init_state(torch.zeros(1, dtype=torch.float64), torch.tensor([1, 2, 3, 4]))
    state["r"] = torch.tensor([0.1, 0.1, 0.6, 0.2], dtype=torch.float64)  # p/r = (1, 2, ½, 2)
    assert algorithm.select(state, context(0, torch.tensor([True, True, True, True]))).tolist() == [1, 3]
    assert algorithm.select(state, context(0, torch.tensor([True, False, True, False]))).tolist() == [0, 2]
    assert algorithm.select(state, context(0, torch.tensor([False, False, True, False]))).tolist() == [2]


@pytest.mark.parametrize("normalization, divisor", [("budget", 4.0), ("none", 1.0)])
def test_update_is_p_over_updated_r_weighted(normalization, divisor):
    algorithm = build_algorithm("f3ast", {"clients_per_round": 4, "beta": 0.5, "global_lr": 2.0,
                                          "normalization": normalization})
    state = algorithm.init_state(torch.zeros(3, dtype=torch.float64), torch.tensor([1, 1, 2]))  # p = (¼, ¼, ½)
    clients = torch.tensor([0, 2])  # fewer than K: the divisor stays K
    start = torch.zeros(2, 3, dtype=torch.float64)
    delta = torch.tensor([[1.0, 0, 0], [0, 0, 1.0]], dtype=torch.float64)
    state = algorithm.aggregate(state, clients, LocalResult(start, start + delta, None, None),
                                context(0, torch.tensor([True, False, True])))
    updated = torch.tensor([0.5 * 0.25 + 0.5, 0.5 * 0.25, 0.5 * 0.5 + 0.5], dtype=torch.float64)
    torch.testing.assert_close(state["r"], updated)
    expected = 2.0 * torch.tensor([0.25 / updated[0], 0.0, 0.5 / updated[2]], dtype=torch.float64) / divisor
    torch.testing.assert_close(state["x"], expected)


def test_defaults_and_validation():
    algorithm = build_algorithm("f3ast", {})
    assert (algorithm.beta, algorithm.normalization) == (0.001, "budget")
    assert algorithm.budget(100) == 10 and algorithm.budget(4) == 1 and algorithm.budget(250) == 25
    with pytest.raises(ValueError, match="beta"):
        build_algorithm("f3ast", {"beta": 0})
    with pytest.raises(ValueError, match="normalization"):
        build_algorithm("f3ast", {"normalization": "mean"})
