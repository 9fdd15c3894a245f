"""gFedAvg on quadratic clients: FedAvg between period boundaries, amplification exactly at them."""

import pytest
import torch

from fedavail.algorithms import build_algorithm

from quadratic import simulate

TARGETS = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 1.0], [2.0, 2.0]], dtype=torch.float64)


def fedavg_step(x, clients, lr, steps, global_lr=1.0):
    if len(clients) == 0:
        return x
    return x + global_lr * (1 - (1 - lr) ** steps) * (TARGETS[clients].mean(0) - x)


def test_amplifies_exactly_after_rounds_p_minus_1_2p_minus_1_and_equals_fedavg_between():
    period, amplification, lr, steps = 5, 3.0, 0.1, 2
    available = torch.rand(17, 4, generator=torch.Generator().manual_seed(0)) < 0.6
    available[9] = False  # an empty round at a boundary still amplifies
    _, history = simulate(build_algorithm("gfedavg", {"amplification": amplification, "period": period}), TARGETS,
                          available, steps=steps, lr=lr)
    x = anchor = torch.zeros(2, dtype=torch.float64)
    fired = []
    for t, record in enumerate(history):
        x = fedavg_step(x, record["clients"], lr, steps)
        if (t + 1) % period == 0:
            x = anchor + amplification * (x - anchor)
            anchor = x
            fired.append(t)
        torch.testing.assert_close(record["x"], x)
    assert fired == [4, 9, 14]


def test_before_the_first_boundary_it_is_fedavg():
    available = torch.rand(12, 4, generator=torch.Generator().manual_seed(1)) < 0.6
    _, amplified = simulate(build_algorithm("gfedavg", {"period": 10}), TARGETS, available, steps=2, lr=0.1)
    _, fedavg = simulate(build_algorithm("fedavg", {}), TARGETS, available, steps=2, lr=0.1)
    for t in range(9):
        torch.testing.assert_close(amplified[t]["x"], fedavg[t]["x"])
    assert not torch.allclose(amplified[9]["x"], fedavg[9]["x"])


def test_amplification_one_is_fedavg():
    available = torch.rand(12, 4, generator=torch.Generator().manual_seed(2)) < 0.6
    one, _ = simulate(build_algorithm("gfedavg", {"amplification": 1.0, "period": 3}), TARGETS, available, steps=2,
                      lr=0.1)
    fedavg, _ = simulate(build_algorithm("fedavg", {}), TARGETS, available, steps=2, lr=0.1)
    torch.testing.assert_close(one["x"], fedavg["x"])


def test_defaults_and_validation():
    algorithm = build_algorithm("gfedavg", {})
    assert (algorithm.amplification, algorithm.period) == (10.0, 100)
    assert [t for t in range(300) if algorithm.amplifies(t)] == [99, 199, 299]
    with pytest.raises(ValueError, match="amplification"):
        build_algorithm("gfedavg", {"amplification": 0.5})
    with pytest.raises(ValueError, match="period"):
        build_algorithm("gfedavg", {"period": 0})
