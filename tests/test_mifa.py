"""MIFA on quadratic clients: FedAvg once every memory is fresh, stale entries rescaled to the current LR, both
never-seen-client conventions."""

import pytest
import torch

from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import RoundContext
from fedavail.engine.local import LocalResult
from fedavail.rng import torch_generator

from quadratic import simulate, sqrt_decay

TARGETS = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 1.0], [2.0, 2.0]], dtype=torch.float64)


def context(round_index: int, available: torch.Tensor, lr: float) -> RoundContext:
    return RoundContext(round=round_index, available=available, prob=None, snapshot=None, lr=lr,
                        generator=torch_generator(0, "algorithm", round_index))


def fedavg_step(x: torch.Tensor, lr: float, steps: int, global_lr: float = 1.0) -> torch.Tensor:
    """FedAvg-active with every client and s exact local steps on ½‖x − u_i‖²."""
    return x + global_lr * (1 - (1 - lr) ** steps) * (TARGETS.mean(0) - x)


def test_full_participation_is_fedavg_at_every_round_under_lr_decay():
    available = torch.ones(8, len(TARGETS), dtype=torch.bool)
    _, mifa = simulate(build_algorithm("mifa", {"global_lr": 1.5}), TARGETS, available, steps=3, lr=sqrt_decay(0.2))
    _, fedavg = simulate(build_algorithm("fedavg", {"global_lr": 1.5}), TARGETS, available, steps=3,
                         lr=sqrt_decay(0.2))
    for a, b in zip(mifa, fedavg, strict=True):
        torch.testing.assert_close(a["x"], b["x"])


@pytest.mark.parametrize("init", ["zero", "wait"])
def test_reduces_to_fedavg_once_every_memory_is_fresh(init):
    partial = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 1, 0, 0]], dtype=torch.bool)
    available = torch.cat([partial, torch.ones(6, 4, dtype=torch.bool)])
    lr = sqrt_decay(0.2)
    _, history = simulate(build_algorithm("mifa", {"init": init}), TARGETS, available, steps=2, lr=lr)
    for t in range(len(partial), len(available)):
        torch.testing.assert_close(history[t]["x"], fedavg_step(history[t - 1]["x"], lr(t), 2))
    assert not torch.allclose(history[1]["x"], fedavg_step(history[0]["x"], lr(1), 2))


def test_stale_entries_are_rescaled_to_the_current_learning_rate():
    algorithm = build_algorithm("mifa", {})
    state = algorithm.init_state(torch.zeros(1, dtype=torch.float64), torch.ones(2, dtype=torch.int64))
    start = torch.zeros(1, 1, dtype=torch.float64)
    # round 0, LR 0.5: client 0 moves by −1, so G_0 = 1/0.5 = 2; x ← 0 − 0.5·(2 + 0)/2 = −0.5
    state = algorithm.aggregate(state, torch.tensor([0]), LocalResult(start, start - 1.0, None, None),
                                context(0, torch.tensor([True, False]), lr=0.5))
    torch.testing.assert_close(state["x"], torch.tensor([-0.5], dtype=torch.float64))
    # round 1, LR 0.1: client 1 moves by +0.3 from x, G_1 = −3; x ← −0.5 − 0.1·(2 − 3)/2 = −0.45
    start = state["x"][None]
    state = algorithm.aggregate(state, torch.tensor([1]), LocalResult(start, start + 0.3, None, None),
                                context(1, torch.tensor([False, True]), lr=0.1))
    torch.testing.assert_close(state["x"], torch.tensor([-0.45], dtype=torch.float64))
    torch.testing.assert_close(state["G"], torch.tensor([[2.0], [-3.0]], dtype=torch.float64))
    # round 2, nobody: the memory still moves x, by the current LR: x ← −0.45 − 0.2·(−1)/2 = −0.35
    empty = torch.zeros(0, 1, dtype=torch.float64)
    state = algorithm.aggregate(state, torch.tensor([], dtype=torch.int64), LocalResult(empty, empty, None, None),
                                context(2, torch.tensor([False, False]), lr=0.2))
    torch.testing.assert_close(state["x"], torch.tensor([-0.35], dtype=torch.float64))


def test_zero_init_moves_with_the_seen_share_only():
    available = torch.tensor([[True, False, False, False]])
    state, _ = simulate(build_algorithm("mifa", {}), TARGETS, available, steps=1, lr=0.5)
    # G_0 = (0 − 0.5·u_0)/0.5 = −u_0; x = −0.5·(−u_0)/4
    torch.testing.assert_close(state["x"], 0.5 * TARGETS[0] / 4)


def test_wait_holds_x0_until_every_client_has_been_seen():
    available = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 1], [0, 1, 0, 0]], dtype=torch.bool)
    lr = sqrt_decay(0.2)
    steps = 2
    _, history = simulate(build_algorithm("mifa", {"init": "wait"}), TARGETS, available, steps=steps, lr=lr)
    for record in history[:3]:
        assert torch.equal(record["x"], torch.zeros(2, dtype=torch.float64))
    # every G_i was computed at x^0 = 0 with the LR of the round client i was last seen in: G_i = −c(η)·u_i/η
    last_seen = [1, 1, 3, 3]
    memory = torch.stack([-(1 - (1 - lr(t)) ** steps) / lr(t) * TARGETS[i] for i, t in enumerate(last_seen)])
    torch.testing.assert_close(history[3]["x"], -lr(3) * memory.mean(0))


def test_running_sum_matches_the_table():
    available = torch.rand(40, 4, generator=torch.Generator().manual_seed(1)) < 0.4
    state, _ = simulate(build_algorithm("mifa", {}), TARGETS, available, steps=2, lr=sqrt_decay(0.1))
    torch.testing.assert_close(state["G_sum"], state["G"].sum(0))
    assert state["seen"].tolist() == available.any(0).tolist()


def test_validation():
    with pytest.raises(ValueError, match="init"):
        build_algorithm("mifa", {"init": "one_pass"})


@pytest.mark.parametrize("normalize, expected_step", [("lr", 0.25), ("raw", 0.5)])
def test_a_stale_entry_is_rescaled_to_the_current_lr_or_kept_raw(normalize, expected_step):
    # Client 0 moves by −a at lr 0.1 in round 0; nobody is available in round 1, where lr = 0.05.
    # lr: G_0 = a / 0.1, so round 1 moves x by −0.05 · G_0 / 2 = −a/4.  raw: G_0 = a, round 1 moves x by −a/2.
    algorithm = build_algorithm("mifa", {"normalize": normalize})
    x0 = torch.zeros(2, dtype=torch.float64)
    a = torch.tensor([1.0, -2.0], dtype=torch.float64)
    state = algorithm.init_state(x0, torch.ones(2, dtype=torch.int64))
    result = LocalResult(x0[None], (x0 - a)[None], None, None)
    state = algorithm.aggregate(state, torch.tensor([0]), result, context(0, torch.tensor([True, False]), 0.1))
    x1 = state["x"].clone()
    torch.testing.assert_close(x1, x0 - a / 2)  # the first round moves by the fresh entry either way
    empty = LocalResult(x0[:0], x0[:0], None, None)
    state = algorithm.aggregate(state, torch.tensor([], dtype=torch.int64), empty,
                                context(1, torch.tensor([False, False]), 0.05))
    torch.testing.assert_close(state["x"], x1 - expected_step * a)
