"""FAST and FAST+ on quadratic clients: the schedule picks snapshot or arbitrary cohorts, the base algorithm does the
rest, so every run must equal its base run on the cohort sequence FAST chose."""

import pytest
import torch

from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import RoundContext
from fedavail.algorithms.fedprox import FedProx
from fedavail.algorithms.scaffold import Scaffold
from fedavail.engine.local import LocalResult
from fedavail.rng import torch_generator

from quadratic import simulate

M, N_SNAPSHOT, T = 8, 3, 24
SETUP = torch.Generator().manual_seed(11)
TARGETS = torch.randn(M, 2, generator=SETUP, dtype=torch.float64)
AVAILABLE = torch.rand(T, M, generator=SETUP) < 0.35
SNAPSHOT = torch.stack([torch.randperm(M, generator=SETUP)[:N_SNAPSHOT] for _ in range(T)])
BASES = [("fedavg", {}), ("fedprox", {"mu": 0.3}), ("scaffold", {"global_lr": 1.5})]


def fast(**hyperparameters):
    return build_algorithm("fast", hyperparameters)


def mask(cohorts: list[list[int]]) -> torch.Tensor:
    available = torch.zeros(len(cohorts), M, dtype=torch.bool)
    for t, clients in enumerate(cohorts):
        available[t, clients] = True
    return available


def assert_same_states(a: dict, b: dict):
    assert set(b) <= set(a)
    for key in b:
        assert torch.equal(a[key], b[key]), key


def run(algorithm, steps=3, lr=0.1, available=AVAILABLE, snapshot=SNAPSHOT, **kwargs):
    return simulate(algorithm, TARGETS, available, steps, lr, snapshot=snapshot, **kwargs)


@pytest.mark.parametrize("base,base_hyperparameters", BASES)
def test_one_local_step_full_participation_is_gradient_descent_on_the_average(base, base_hyperparameters):
    hyper = {k: v for k, v in base_hyperparameters.items() if k != "global_lr"}
    algorithm = fast(base=base, base_hyperparameters=hyper, schedule="bernoulli", q=0.5)
    full = torch.stack([torch.randperm(M, generator=torch.Generator().manual_seed(t)) for t in range(12)])
    _, history = run(algorithm, steps=1, lr=0.3, available=torch.ones(12, M, dtype=torch.bool), snapshot=full)
    x = torch.zeros(2, dtype=torch.float64)
    for record in history:
        x = x - 0.3 * (x - TARGETS.mean(0))
        torch.testing.assert_close(record["x"], x)
    assert 0 < sum(r["snapshot"] for r in history) < 12


@pytest.mark.parametrize("base,base_hyperparameters", BASES)
def test_q_one_is_the_base_on_the_snapshot_cohorts(base, base_hyperparameters):
    state, history = run(fast(base=base, base_hyperparameters=base_hyperparameters, q=1.0))
    reference, reference_history = run(build_algorithm(base, base_hyperparameters), available=mask(SNAPSHOT.tolist()))
    assert all(r["snapshot"] == 1 and r["q"] == 1.0 for r in history)
    assert [r["clients"] for r in history] == [sorted(c) for c in SNAPSHOT.tolist()]
    assert_same_states(state, reference)
    assert all(torch.equal(a["x"], b["x"]) for a, b in zip(history, reference_history))


@pytest.mark.parametrize("base,base_hyperparameters", BASES)
def test_q_zero_is_the_base_on_the_available_cohorts(base, base_hyperparameters):
    state, history = run(fast(base=base, base_hyperparameters=base_hyperparameters, q=0.0))
    reference, reference_history = run(build_algorithm(base, base_hyperparameters))
    assert all(r["snapshot"] == 0 for r in history)
    assert [r["clients"] for r in history] == [r["clients"] for r in reference_history]
    assert_same_states(state, reference)
    assert all(torch.equal(a["x"], b["x"]) for a, b in zip(history, reference_history))


@pytest.mark.parametrize("base,base_hyperparameters", BASES)
def test_mixed_schedule_is_the_base_on_the_cohorts_fast_chose(base, base_hyperparameters):
    state, history = run(fast(base=base, base_hyperparameters=base_hyperparameters, q=0.5), seed=4)
    flags = [r["snapshot"] for r in history]
    assert 0 < sum(flags) < T
    for r, t_snapshot, t_available in zip(history, SNAPSHOT.tolist(), AVAILABLE):
        expected = sorted(t_snapshot) if r["snapshot"] else torch.nonzero(t_available).flatten().tolist()
        assert r["clients"] == expected
    reference, _ = run(build_algorithm(base, base_hyperparameters), available=mask([r["clients"] for r in history]))
    assert_same_states(state, reference)


def test_every_interval_snapshots_exactly_the_rounds_divisible_by_it():
    _, history = run(fast(schedule="every", interval=3))
    assert [r["snapshot"] for r in history] == [int(t % 3 == 0) for t in range(T)]
    assert all(r["q"] == pytest.approx(1 / 3) for r in history)
    for t, r in enumerate(history):
        expected = sorted(SNAPSHOT[t].tolist()) if t % 3 == 0 else torch.nonzero(AVAILABLE[t]).flatten().tolist()
        assert r["clients"] == expected


@pytest.mark.parametrize("seed", [0, 5])
def test_bernoulli_snapshots_are_the_rounds_whose_algorithm_draw_is_below_q(seed):
    rounds = 400
    available = torch.ones(rounds, M, dtype=torch.bool)
    snapshot = SNAPSHOT[torch.arange(rounds) % T]
    _, history = simulate(fast(q=0.3), TARGETS, available, 1, 0.1, snapshot=snapshot, seed=seed)
    draws = [torch.rand((), generator=torch_generator(seed, "algorithm", t), dtype=torch.float64).item()
             for t in range(rounds)]
    assert [r["snapshot"] for r in history] == [int(u < 0.3) for u in draws]
    assert 0.22 < sum(r["snapshot"] for r in history) / rounds < 0.38


SCRIPTED_ACC = [0.5, 0.3, 0.4, 0.1, 0.9, 0.8, 0.2, 0.6]
# Algorithm 2 by hand, q_0 = 0 and acc_{-1} = 0; q_{r+1} = clip(q_r + λ(acc_{r-1} − acc_r), 0, 1). Listed: q_0 .. q_8.
HAND_Q = {
    1.0: [0.0, 0.0, 0.2, 0.1, 0.4, 0.0, 0.1, 0.7, 0.3],  # q_1 = clip(0 − 0.5) = 0, q_2 = 0 + 0.5 − 0.3, ...
    2.0: [0.0, 0.0, 0.4, 0.2, 0.8, 0.0, 0.2, 1.0, 0.2],  # q_7 = clip(0.2 + 2·0.6) = 1 (clipped)
}


def scripted_accuracy(values):
    def accuracy(t, clients):
        # Per-client values that average to the script: the schedule uses the participants' mean.
        spread = clients.double() - clients.double().mean()
        return values[t] + 0.01 * spread

    return accuracy


@pytest.mark.parametrize("lam", [1.0, 2.0])
def test_adaptive_q_follows_algorithm_two(lam):
    rounds = len(SCRIPTED_ACC)
    state, history = run(fast(schedule="adaptive", lam=lam), available=AVAILABLE[:rounds] | True,
                         snapshot=SNAPSHOT[:rounds], accuracy=scripted_accuracy(SCRIPTED_ACC), seed=2)
    expected = HAND_Q[lam]
    torch.testing.assert_close([r["q"] for r in history], expected[:rounds])  # the q that governed round r
    torch.testing.assert_close(state["q"].item(), expected[rounds])
    torch.testing.assert_close([r["q_signal"] for r in history], SCRIPTED_ACC[:rounds])  # acc_r behind q_{r+1}
    draws = [torch.rand((), generator=torch_generator(2, "algorithm", t), dtype=torch.float64).item()
             for t in range(rounds)]
    assert [r["snapshot"] for r in history] == [int(u < q) for u, q in zip(draws, expected)]
    if lam == 2.0:
        assert history[7]["snapshot"] == 1 and history[0]["snapshot"] == history[1]["snapshot"] == 0


def test_adaptive_round_without_participants_leaves_q_and_the_last_accuracy():
    available = torch.ones(3, M, dtype=torch.bool)
    available[1] = False  # q_1 = 0, so round 1 is arbitrary and has nobody
    state, history = run(fast(schedule="adaptive"), available=available, snapshot=SNAPSHOT[:3],
                         accuracy=scripted_accuracy([0.5, 0.0, 0.3]))
    assert history[1]["clients"] == [] and [r["q"] for r in history] == [0.0, 0.0, 0.0]
    torch.testing.assert_close(state["q"].item(), 0.2)  # clip(0 + (acc_0 − acc_2)) = 0.5 − 0.3
    torch.testing.assert_close(state["last_acc"].item(), 0.3)


def test_fast_scaffold_keeps_c_the_mean_of_c_i_and_updates_only_participants():
    algorithm = fast(base="scaffold", q=0.5)
    assert isinstance(algorithm.inner, Scaffold)
    state, history = run(algorithm, seed=1)
    assert 0 < sum(r["snapshot"] for r in history) < T
    torch.testing.assert_close(state["c"], state["c_i"].mean(0), rtol=0, atol=1e-12)
    touched = mask([r["clients"] for r in history]).any(0)
    assert state["c_i"][touched].abs().sum(1).gt(0).all() and not state["c_i"][~touched].any()


def test_state_is_the_base_state_plus_the_schedule():
    algorithm = fast(base="fedprox", base_hyperparameters={"mu": 0.01}, schedule="adaptive")
    assert isinstance(algorithm.inner, FedProx) and algorithm.inner.mu == 0.01
    state = algorithm.init_state(torch.zeros(5), torch.ones(4, dtype=torch.int64))
    assert set(state) == {"x", "q", "last_q", "last_snapshot", "last_acc"}
    assert all(state[k].dim() == 0 for k in ("q", "last_q", "last_snapshot", "last_acc"))
    assert state["q"].item() == 0.0


def test_a_trace_without_snapshot_cohorts_is_refused():
    with pytest.raises(ValueError, match="snapshot"):
        run(fast(q=0.0), snapshot=None)


@pytest.mark.parametrize("hyperparameters,message", [
    ({"mu": 0.1}, "mu"),
    ({"global_lr": 2.0}, "global_lr"),
    ({"base": "fedprox", "base_hyperparameters": {"nu": 1}}, "nu"),
    ({"base": "mifa"}, "base"),
    ({"base": "fast"}, "base"),
    ({"schedule": "sometimes"}, "schedule"),
    ({"q": 1.5}, "q"),
    ({"interval": 0}, "interval"),
    ({"lam": -1.0}, "lam"),
])
def test_bad_configs_are_refused_naming_the_key(hyperparameters, message):
    with pytest.raises(ValueError, match=message):
        fast(**hyperparameters)


@pytest.mark.parametrize("signal", ["round_mean", "running"])
def test_adaptive_signal_reads_the_round_mean_or_the_running_accuracy(signal):
    algorithm = fast(schedule="adaptive", lam=1.0, signal=signal)
    x0 = torch.zeros(2, dtype=torch.float64)
    state = algorithm.init_state(x0, torch.ones(M, dtype=torch.int64))
    available = torch.ones(M, dtype=torch.bool)
    clients = torch.tensor([0, 1])
    starts = x0.expand(2, -1)
    for t, (round_mean, running) in enumerate([([0.6, 0.8], [0.5, 0.5]), ([0.2, 0.2], [0.4, 0.6])]):
        ctx = RoundContext(round=t, available=available, prob=None, snapshot=SNAPSHOT[t], lr=0.1,
                           generator=torch_generator(0, "algorithm", t))
        result = LocalResult(starts, starts.clone(), torch.zeros(2), torch.tensor(round_mean),
                             torch.ones(2, dtype=torch.int64), torch.tensor(running))
        state = algorithm.aggregate(state, clients, result, ctx)
    # q_2 = clip(q_1 + (acc_0 − acc_1)); q_1 = clip(0 + (0 − acc_0)) = 0.
    expected = {"round_mean": 0.7 - 0.2, "running": 0.5 - 0.5}[signal]
    torch.testing.assert_close(state["q"].item(), expected)
