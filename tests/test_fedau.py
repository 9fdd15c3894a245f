"""FedAU: the interval bookkeeping and weights, round by round and in the long run."""

import math

import pytest
import torch

from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import RoundContext
from fedavail.engine.local import LocalResult

GENERATOR = torch.Generator()  # FedAU draws nothing


def context(round_index: int, available: torch.Tensor) -> RoundContext:
    return RoundContext(round=round_index, available=available, prob=None, snapshot=None, lr=0.1,
                        generator=GENERATOR)


def drive(algorithm, available: torch.Tensor, dimension: int | None = None):
    """Run the server side over an availability trace [T, m]; client i's update is the unit vector e_i when
    `dimension` = m (so x_i accumulates client i's weights / N), or zero in a 1-d model. Returns (state, weights)."""
    rounds, m = available.shape
    d = dimension or 1
    state = algorithm.init_state(torch.zeros(d, dtype=torch.float64), torch.ones(m, dtype=torch.int64))
    used = []
    for t in range(rounds):
        clients = torch.nonzero(available[t]).flatten()
        if dimension:
            used.append(dict(zip(clients.tolist(), algorithm.weights(state, clients).tolist(), strict=True)))
        start = state["x"].expand(len(clients), -1)
        step = torch.eye(m, dtype=torch.float64)[clients] if dimension else torch.zeros(len(clients), 1).double()
        state = algorithm.aggregate(state, clients, LocalResult(start, start + step, None, None),
                                    context(t, available[t]))
    return state, used


def test_weights_use_intervals_before_this_round_and_the_update_divides_by_n():
    # client 0 participates in rounds 0, 2, 5; client 1 in round 1 only; client 2 never
    available = torch.zeros(6, 3, dtype=torch.bool)
    available[[0, 2, 5], 0] = True
    available[1, 1] = True
    algorithm = build_algorithm("fedau", {"global_lr": 3.0})
    state, used = drive(algorithm, available, dimension=3)
    assert used[0] == {0: 1.0}  # first participation: weight 1 (then records interval 1)
    assert used[1] == {1: 1.0}  # first participation, after one missed round (records 2)
    assert used[2] == {0: 1.0}  # intervals so far: [1]; this round closes an interval of 2
    assert used[5] == {0: 1.5}  # intervals so far: [1, 2]; this round closes an interval of 3
    torch.testing.assert_close(state["x"], 3.0 * torch.tensor([1 + 1 + 1.5, 1, 0], dtype=torch.float64) / 3)
    assert state["M"].tolist() == [3, 1, 0]
    torch.testing.assert_close(state["Omega"], torch.tensor([2.0, 2.0, 0.0], dtype=torch.float64))
    assert state["S"].tolist() == [0, 4, 6]


def test_cutoff_records_long_absences_and_caps_the_weight():
    available = torch.zeros(12, 1, dtype=torch.bool)
    available[[0, 11], 0] = True
    state, used = drive(build_algorithm("fedau", {"cutoff": 4}), available, dimension=1)
    # after round 0 (interval 1): absent rounds 1-4 record 4, 5-8 record 4, 9-10 then participation records 3
    assert used[11] == {0: pytest.approx((1 + 4 + 4) / 3)}
    assert state["M"].tolist() == [4] and state["Omega"].item() == pytest.approx((1 + 4 + 4 + 3) / 4)


@pytest.mark.parametrize("cutoff", [50, None])
def test_weights_converge_to_inverse_participation_probability(cutoff):
    """For Bernoulli(p) availability the intervals are Geometric(p); with cutoff K the recorded pieces average
    E[G] / E[#pieces per interval] = (1 − (1 − p)^K)/p (→ 1/p as K → ∞)."""
    p = torch.tensor([0.1, 0.25, 0.5, 0.9], dtype=torch.float64)
    rounds = 20_000
    available = torch.rand(rounds, len(p), generator=torch.Generator().manual_seed(0), dtype=torch.float64) < p
    state, _ = drive(build_algorithm("fedau", {"cutoff": cutoff}), available)
    for i, p_i in enumerate(p.tolist()):
        expected = (1 - (1 - p_i) ** (cutoff or math.inf)) / p_i
        standard_error = math.sqrt((1 - p_i) / p_i**2 / (rounds * p_i))
        assert abs(state["Omega"][i].item() - expected) < 4 * standard_error, (i, state["Omega"][i].item())


def test_a_client_that_stops_participating_gets_weight_at_most_k():
    rounds, cutoff = 3000, 50
    available = torch.rand(rounds, 1, generator=torch.Generator().manual_seed(1)) < 0.5
    available[1000:] = False
    algorithm = build_algorithm("fedau", {"cutoff": cutoff})
    state = algorithm.init_state(torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.int64))
    weights = []
    empty = torch.zeros(0, 1, dtype=torch.float64)
    for t in range(rounds):
        clients = torch.nonzero(available[t]).flatten()
        start = empty if len(clients) == 0 else state["x"][None]
        state = algorithm.aggregate(state, clients, LocalResult(start, start, None, None), context(t, available[t]))
        weights.append(algorithm.weights(state, torch.tensor([0])).item())  # the weight it would get next round
    assert max(weights) <= cutoff
    assert all(b >= a for a, b in zip(weights[1000:], weights[1001:]))  # rising towards K while it stays away
    assert weights[-1] > 2 * weights[999]
    frozen, _ = drive(build_algorithm("fedau", {"cutoff": None}), available)
    assert frozen["M"].item() == int(available.sum())  # with K = ∞ an absentee's estimate never moves


def test_validation():
    assert build_algorithm("fedau", {}).cutoff == 50
    with pytest.raises(ValueError, match="cutoff"):
        build_algorithm("fedau", {"cutoff": 0})
