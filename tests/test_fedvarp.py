"""FedVARP on quadratic clients: FedAvg under full participation, the variance-reduced update round by round."""

import torch

from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import RoundContext
from fedavail.engine.local import LocalResult
from fedavail.rng import torch_generator

from quadratic import simulate, sqrt_decay

TARGETS = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 1.0], [2.0, 2.0]], dtype=torch.float64)


def context(round_index: int, available: torch.Tensor) -> RoundContext:
    return RoundContext(round=round_index, available=available, prob=None, snapshot=None, lr=0.1,
                        generator=torch_generator(0, "algorithm", round_index))


def test_full_participation_is_fedavg_at_every_round():
    """ȳ = mean y_i, so U = ȳ + mean(Δ_i − y_i) = mean Δ_i: exactly FedAvg-active (also in round 0, y = 0)."""
    available = torch.ones(8, len(TARGETS), dtype=torch.bool)
    _, varp = simulate(build_algorithm("fedvarp", {"global_lr": 1.5}), TARGETS, available, steps=3,
                       lr=sqrt_decay(0.2))
    _, fedavg = simulate(build_algorithm("fedavg", {"global_lr": 1.5}), TARGETS, available, steps=3,
                         lr=sqrt_decay(0.2))
    for a, b in zip(varp, fedavg, strict=True):
        torch.testing.assert_close(a["x"], b["x"])


def test_reduces_to_fedavg_once_every_memory_is_fresh():
    partial = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 1, 0, 0]], dtype=torch.bool)
    available = torch.cat([partial, torch.ones(5, 4, dtype=torch.bool)])
    lr, steps = sqrt_decay(0.2), 2
    _, history = simulate(build_algorithm("fedvarp", {}), TARGETS, available, steps=steps, lr=lr)
    for t in range(len(partial), len(available)):
        x = history[t - 1]["x"]
        torch.testing.assert_close(history[t]["x"], x + (1 - (1 - lr(t)) ** steps) * (TARGETS.mean(0) - x))


def test_one_round_uses_the_memory_then_refreshes_it():
    algorithm = build_algorithm("fedvarp", {"global_lr": 2.0})
    state = algorithm.init_state(torch.zeros(1, dtype=torch.float64), torch.ones(4, dtype=torch.int64))
    state["y"] = torch.tensor([[1.0], [2.0], [3.0], [6.0]], dtype=torch.float64)
    state["y_bar"] = torch.tensor([3.0], dtype=torch.float64)
    clients = torch.tensor([1, 3])
    start = torch.zeros(2, 1, dtype=torch.float64)
    delta = torch.tensor([[4.0], [2.0]], dtype=torch.float64)
    state = algorithm.aggregate(state, clients, LocalResult(start, start + delta, None, None),
                                context(0, torch.tensor([False, True, False, True])))
    # U = 3 + ((4 − 2) + (2 − 6))/2 = 2;  x = 2·2;  ȳ = 3 + (2 − 4)/4;  y_1, y_3 ← Δ
    torch.testing.assert_close(state["x"], torch.tensor([4.0], dtype=torch.float64))
    torch.testing.assert_close(state["y_bar"], torch.tensor([2.5], dtype=torch.float64))
    torch.testing.assert_close(state["y"], torch.tensor([[1.0], [4.0], [3.0], [2.0]], dtype=torch.float64))
    torch.testing.assert_close(state["y_bar"], state["y"].mean(0))


def test_nobody_available_means_no_update_as_the_reference_code():
    available = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    _, history = simulate(build_algorithm("fedvarp", {}), TARGETS, available, steps=1, lr=0.5)
    assert history[1]["x"].abs().sum() > 0
    assert torch.equal(history[1]["x"], history[0]["x"])


def test_incremental_mean_matches_the_table():
    available = torch.rand(40, 4, generator=torch.Generator().manual_seed(2)) < 0.4
    state, _ = simulate(build_algorithm("fedvarp", {}), TARGETS, available, steps=2, lr=sqrt_decay(0.1))
    torch.testing.assert_close(state["y_bar"], state["y"].mean(0))
