"""FedSWE on quadratic clients: Proposition 14 / Fig. 5, the full-participation relation to FedAvg, echoing and
postponed multicast checked round by round."""

import pytest
import torch

from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import RoundContext
from fedavail.engine.local import LocalResult
from fedavail.rng import torch_generator

from quadratic import quadratic_local_train, run_round, simulate, sqrt_decay

U = torch.tensor([[100.0], [-100.0]], dtype=torch.float64)
TARGETS = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 1.0], [2.0, 2.0]], dtype=torch.float64)


def alternating(rounds: int) -> torch.Tensor:
    """Proposition 14: client 1 available only in even rounds, client 2 only in odd rounds."""
    t = torch.arange(rounds)
    return torch.stack([t % 2 == 0, t % 2 == 1], dim=1)


def context(round_index: int, available: torch.Tensor, lr: float = 0.1) -> RoundContext:
    return RoundContext(round=round_index, available=available, prob=None, snapshot=None, lr=lr,
                        generator=torch_generator(0, "algorithm", round_index))


def test_proposition_14_without_interpolation_the_server_alternates_and_clients_never_agree():
    state, history = simulate(build_algorithm("fedswe", {"k": 0}), U, alternating(1000), steps=10,
                              lr=sqrt_decay(0.01))
    for record in history[-100:]:
        expected = 100.0 if record["round"] % 2 == 0 else -100.0  # the model of the client that just reported
        assert abs(record["x"].item() - expected) < 1.0
        assert record["consensus_error"] > 0.99e4  # (1/2)(100² + 100²): the clients stay at their own optima
    torch.testing.assert_close(state["X"], U, atol=1e-3, rtol=0)


@pytest.mark.parametrize("rounds, tolerance", [(1000, 0.02), (10_000, 0.005)])
def test_proposition_14_with_interpolation_server_and_clients_approach_the_global_minimiser(rounds, tolerance):
    state, history = simulate(build_algorithm("fedswe", {"k": 1}), U, alternating(rounds), steps=10,
                              lr=sqrt_decay(0.01))
    bound = tolerance * 100.0
    assert abs(state["x"].item()) < bound
    assert state["X"].abs().max().item() < bound
    consensus = [record["consensus_error"] for record in history]
    assert consensus[-1] < 0.02 * max(consensus)  # with k = 0 it stays at 10⁴ (test above)


@pytest.mark.parametrize("k", [0.0, 5.0, 100.0])
def test_full_participation_is_fedavg_then_a_moving_average_with_weights_m_and_k(k):
    """Everyone always available: X_i = x^t and t − τ_i = 1, so x^{t+1} = (m·x_FedAvg + k·x^t)/(m + k), where
    x_FedAvg = x^t + η_g·(1 − (1 − η)^s)·(ū − x^t) is FedAvg-active with s exact local steps."""
    m, steps, lr, global_lr = len(TARGETS), 3, 0.2, 1.5
    available = torch.ones(8, m, dtype=torch.bool)
    _, history = simulate(build_algorithm("fedswe", {"k": k, "global_lr": global_lr}), TARGETS, available,
                          steps=steps, lr=lr)
    contraction = 1 - (1 - lr) ** steps
    x = torch.zeros(2, dtype=torch.float64)
    for record in history:
        fedavg = x + global_lr * contraction * (TARGETS.mean(0) - x)
        x = (m * fedavg + k * x) / (m + k)
        torch.testing.assert_close(record["x"], x)
        assert record["consensus_error"] < 1e-20  # the multicast reaches every client


def test_k_zero_full_participation_equals_fedavg_with_any_schedule():
    available = torch.ones(6, len(TARGETS), dtype=torch.bool)
    _, swe = simulate(build_algorithm("fedswe", {"k": 0, "global_lr": 1.3}), TARGETS, available, steps=4,
                      lr=sqrt_decay(0.3))
    _, avg = simulate(build_algorithm("fedavg", {"global_lr": 1.3}), TARGETS, available, steps=4, lr=sqrt_decay(0.3))
    for a, b in zip(swe, avg, strict=True):
        torch.testing.assert_close(a["x"], b["x"])


def test_one_round_echoes_by_staleness_and_multicasts_only_to_participants():
    algorithm = build_algorithm("fedswe", {"k": 2.0, "global_lr": 0.5})
    d = 2
    state = algorithm.init_state(torch.zeros(d, dtype=torch.float64), torch.ones(3, dtype=torch.int64))
    state["X"] = torch.tensor([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]], dtype=torch.float64)
    state["tau"] = torch.tensor([3, -1, 4])
    state["x"] = torch.tensor([2.0, 2.0], dtype=torch.float64)
    clients = torch.tensor([0, 1])
    starts = algorithm.start_points(state, clients, context(5, torch.tensor([True, True, False])))
    torch.testing.assert_close(starts, state["X"][:2])  # participants start from their own stale models
    ends = starts + torch.tensor([[1.0, 0.0], [0.0, -1.0]], dtype=torch.float64)
    result = LocalResult(starts, ends, torch.zeros(2), torch.zeros(2))
    state = algorithm.aggregate(state, clients, result, context(5, torch.tensor([True, True, False])))
    echoed = [torch.tensor([1.0 + 0.5 * 2 * 1.0, 0.0]),  # t − τ = 5 − 3 = 2
              torch.tensor([0.0, 1.0 - 0.5 * 6 * 1.0])]  # first participation: t − τ = 5 − (−1) = 6
    expected = (echoed[0] + echoed[1] + 2.0 * torch.tensor([2.0, 2.0])) / (2 + 2.0)
    torch.testing.assert_close(state["x"], expected.double())
    torch.testing.assert_close(state["X"][:2], expected.double().expand(2, -1))
    torch.testing.assert_close(state["X"][2], torch.tensor([5.0, 5.0], dtype=torch.float64))  # absent: stale
    assert state["tau"].tolist() == [5, 5, 4]


@pytest.mark.parametrize("k", [0.0, 100.0])
def test_nobody_available_changes_nothing(k):
    available = torch.zeros(4, len(TARGETS), dtype=torch.bool)
    state, _ = simulate(build_algorithm("fedswe", {"k": k}), TARGETS, available, steps=3, lr=0.1,
                        x0=torch.ones(2, dtype=torch.float64))
    assert torch.equal(state["x"], torch.ones(2, dtype=torch.float64))
    assert torch.equal(state["X"], torch.ones(4, 2, dtype=torch.float64))
    assert state["tau"].tolist() == [-1, -1, -1, -1]


def test_echo_multipliers_equalise_the_number_of_local_updates():
    """Proposition 2: for a client active in round R − 1, Σ_{t<R} 1{i ∈ A_t}(t − τ_i(t)) = R."""
    m, rounds = 6, 60
    available = torch.rand(rounds, m, generator=torch.Generator().manual_seed(3), dtype=torch.float64) < 0.3
    algorithm = build_algorithm("fedswe", {"k": 1})
    state = algorithm.init_state(torch.zeros(1, dtype=torch.float64), torch.ones(m, dtype=torch.int64))
    echoed = torch.zeros(m, dtype=torch.int64)
    local_train = quadratic_local_train(torch.zeros(m, 1, dtype=torch.float64), steps=1)
    for t in range(rounds):
        active = available[t]
        echoed[active] += t - state["tau"][active]
        state, _, _ = run_round(algorithm, state, context(t, active), local_train)
        assert torch.equal(echoed[active], torch.full((int(active.sum()),), t + 1))


def test_echo_clip_rescales_the_averaged_echoed_update():
    algorithm = build_algorithm("fedswe", {"k": 0, "global_lr": 2.0, "echo_clip": 0.5})
    state = algorithm.init_state(torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.int64))
    state["X"] = torch.tensor([[1.0, 1.0], [3.0, 1.0]], dtype=torch.float64)
    clients = torch.tensor([0, 1])
    starts = state["X"].clone()
    ends = starts + torch.tensor([[3.0, 0.0], [1.0, 0.0]], dtype=torch.float64)  # echo ×1 (τ = −1, t = 0)
    state = algorithm.aggregate(state, clients, LocalResult(starts, ends, torch.zeros(2), torch.zeros(2)),
                                context(0, torch.tensor([True, True])))
    # mean start (2, 1) + η_g · clip((2, 0), 0.5) = (2, 1) + 2·(0.5, 0)
    torch.testing.assert_close(state["x"], torch.tensor([3.0, 1.0], dtype=torch.float64))


def test_a_large_echo_clip_changes_nothing():
    available = torch.rand(20, 4, generator=torch.Generator().manual_seed(0)) < 0.5
    clipped, _ = simulate(build_algorithm("fedswe", {"k": 3, "echo_clip": 1e6}), TARGETS, available, steps=2, lr=0.1)
    plain, _ = simulate(build_algorithm("fedswe", {"k": 3}), TARGETS, available, steps=2, lr=0.1)
    torch.testing.assert_close(clipped["x"], plain["x"])


def test_evaluates_server_and_mean_local_model_and_reports_consensus_error():
    algorithm = build_algorithm("fedswe", {})
    state = algorithm.init_state(torch.zeros(2, dtype=torch.float64), torch.ones(3, dtype=torch.int64))
    state["X"] = torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]], dtype=torch.float64)
    models = algorithm.eval_models(state)
    assert set(models) == {"global", "local_mean"}
    torch.testing.assert_close(models["local_mean"], torch.tensor([1.0, 1.0], dtype=torch.float64))
    # ‖(−1,−1)‖² + ‖(2,−1)‖² + ‖(−1,2)‖² = 2 + 5 + 5, over m = 3
    assert algorithm.eval_metrics(state)["consensus_error"] == pytest.approx(4.0)


def test_defaults_and_validation():
    algorithm = build_algorithm("fedswe", {})
    assert (algorithm.k, algorithm.echo_clip, algorithm.global_lr) == (100.0, None, 1.0)
    with pytest.raises(ValueError, match="k"):
        build_algorithm("fedswe", {"k": -1})
    with pytest.raises(ValueError, match="interpolation"):
        build_algorithm("fedswe", {"interpolation": 1})
