import re

import numpy as np
import pytest

from fedavail.availability.trace_models import TRACE_MODELS, resolve_trace
from fedavail.availability.traces import load_trace, make_trace, plot_trace, save_trace
from fedavail.partitions.partition import make_partition

M, T = 100, 2000
Z_BOUND = 4.5  # |z| beyond this for any of ~100 checks has probability < 1e-3 under the model


@pytest.fixture(scope="module")
def partition():
    labels = np.random.default_rng(0).permutation(np.repeat(np.arange(10), 300))
    return make_partition(labels, 10, {"scheme": "client_dirichlet", "num_clients": M, "alpha": 0.1}, seed=0)


def assert_bernoulli_frequencies(trace):
    """Counts of a_i^t match Σ p_i^t within binomial bounds, per client and per round (across clients)."""
    prob = trace.prob.astype(np.float64)
    available = trace.available
    assert not available[prob == 0].any() and available[prob == 1].all()
    for axis in (0, 1):
        expected = prob.sum(axis=axis)
        spread = np.sqrt((prob * (1 - prob)).sum(axis=axis))
        z = (available.sum(axis=axis) - expected)[spread > 0] / spread[spread > 0]
        assert np.abs(z).max(initial=0.0) < Z_BOUND, np.abs(z).max(initial=0.0)


@pytest.mark.parametrize(
    "spec",
    [
        {"model": "fedswe", "dynamics": "stationary"},
        {"model": "fedswe", "dynamics": "staircase"},
        {"model": "fedswe", "dynamics": "sine", "gamma": 0.3, "period": 20},
        {"model": "fedswe", "dynamics": "two_group"},
        {"model": "fedswe", "dynamics": "two_group", "inner": "staircase"},
        {"model": "fedswe", "dynamics": "stationary", "class_mix": "empirical"},
        {"model": "bernoulli", "p": 0.3},
        {"model": "bernoulli", "p": list(np.linspace(0, 1, M))},
        {"model": "cyclic", "groups": 4, "p": 0.8},
        {"model": "cyclic", "groups": 5, "p": 1.0, "active_rounds": 10},
    ],
)
def test_bernoulli_models_match_their_probabilities(spec, partition):
    trace = make_trace(spec, M, T, seed=1, partition=partition)
    assert trace.available.shape == (T, M) and trace.available.dtype == bool
    assert trace.prob.shape == (T, M) and trace.prob.dtype == np.float32
    assert trace.prob.min() >= 0 and trace.prob.max() <= 1
    assert_bernoulli_frequencies(trace)


def test_fedswe_probabilities_follow_the_paper(partition):
    stationary = make_trace({"model": "fedswe", "dynamics": "stationary"}, M, T, 2, partition)
    base = stationary.prob[0].astype(np.float64)
    phi = np.array(stationary.params["phi"])
    assert np.all(phi[:5] <= 1.0) and np.all(phi[5:] <= 0.5)
    assert np.allclose(base, partition.nu @ phi, atol=1e-6)
    assert np.allclose(stationary.prob, base)
    t = np.arange(T)
    staircase = make_trace({"model": "fedswe", "dynamics": "staircase"}, M, T, 2, partition)
    assert np.allclose(staircase.prob, base * np.where(t % 20 < 10, 1.0, 0.4)[:, None], atol=1e-6)
    sine = make_trace({"model": "fedswe", "dynamics": "sine"}, M, T, 2, partition)
    assert np.allclose(sine.prob, base * (0.3 * np.sin(2 * np.pi * t / 20) + 0.7)[:, None], atol=1e-6)
    two_group = make_trace({"model": "fedswe", "dynamics": "two_group"}, M, T, 2, partition)
    first_half = (t % 100) < 50
    assert np.all(two_group.prob[~first_half, :50] == 0) and np.all(two_group.prob[first_half, 50:] == 0)
    assert np.allclose(two_group.prob[first_half, :50], base[:50], atol=1e-6)
    assert np.allclose(two_group.prob[~first_half, 50:], base[50:], atol=1e-6)


def test_fedswe_needs_a_class_mix():
    with pytest.raises(ValueError, match="partition"):
        make_trace({"model": "fedswe"}, M, T, 0)
    labels = np.arange(400) % 10
    natural = make_partition(labels, 10, {"scheme": "natural"}, 0, groups=np.arange(400) % 20)
    with pytest.raises(ValueError, match="'class_mix'"):
        make_trace({"model": "fedswe"}, 20, 50, 0, natural)
    assert make_trace({"model": "fedswe", "class_mix": "empirical"}, 20, 50, 0, natural).prob.shape == (50, 20)


@pytest.mark.parametrize("distribution", ["uniform", "beta", "gamma", "weibull"])
def test_fast_cohorts_have_the_right_size(distribution):
    trace = make_trace({"model": "fast", "distribution": distribution}, M, T, seed=3)
    assert np.all(trace.available.sum(axis=1) == 10)
    assert trace.snapshot.shape == (T, 10)
    if distribution == "uniform":
        assert np.allclose(trace.prob, 0.1)
        counts = trace.available.sum(axis=0)
        assert np.abs(counts - T * 0.1).max() < Z_BOUND * np.sqrt(T * 0.1 * 0.9)
    else:
        assert trace.prob is None


def test_fast_skew_follows_the_index_distribution():
    mean_index = {
        d: np.nonzero(make_trace({"model": "fast", "distribution": d}, M, T, seed=4).available)[1].mean()
        for d in ("uniform", "beta", "gamma", "weibull")
    }
    assert abs(mean_index["uniform"] - 49.5) < 1.5
    assert mean_index["beta"] < 15 and mean_index["gamma"] < 15  # Beta(1, 10) and Gamma(10, 0.01): mean Z ≈ 0.1
    assert mean_index["weibull"] > 65  # Weibull(10)/1.2: mean Z ≈ 0.79


def test_fast_impossible_cohort_raises_quickly():
    with pytest.raises(ValueError, match="'fraction'"):
        make_trace({"model": "fast", "distribution": "gamma", "fraction": 0.9}, M, 50, seed=0)


def test_markov_chain_transitions_and_marginal():
    trace = make_trace({"model": "markov", "p_on": 0.1, "p_off": 0.3}, M, T, seed=5)
    before, after = trace.available[:-1], trace.available[1:]
    turn_on = (after & ~before).sum() / (~before).sum()
    turn_off = (~after & before).sum() / before.sum()
    assert abs(turn_on - 0.1) < 0.01 and abs(turn_off - 0.3) < 0.015
    assert np.allclose(trace.prob, 0.25)
    assert abs(trace.available.mean() - 0.25) < 0.01


def test_every_model_has_uniform_snapshots(partition):
    specs = [
        {"model": "fedswe"},
        {"model": "bernoulli", "p": 0.5, "snapshot_size": 7},
        {"model": "markov", "p_on": 0.5, "p_off": 0.5},
        {"model": "cyclic", "groups": 2, "p": 0.5},
        {"model": "fast", "distribution": "beta"},
    ]
    snapshots = [make_trace(s, M, T, seed=6, partition=partition).snapshot for s in specs]
    for snapshot, size in zip(snapshots, (10, 7, 10, 10, 10)):
        assert snapshot.shape == (T, size) and snapshot.dtype == np.int64
        assert np.all(np.diff(snapshot, axis=1) > 0) and snapshot.min() >= 0 and snapshot.max() < M
    assert np.array_equal(snapshots[0], snapshots[2])  # one seed, one snapshot stream
    assert abs(np.asarray(snapshots[0]).mean() - 49.5) < 1.5


@pytest.mark.parametrize(
    "spec",
    [
        {"model": "fedswe", "dynamics": "sine"},
        {"model": "fast", "distribution": "weibull"},
        {"model": "markov", "p_on": 0.2, "p_off": 0.2},
    ],
)
def test_same_seed_same_bytes_and_round_trip(spec, partition, tmp_path):
    save_trace(tmp_path / "a.npz", make_trace(spec, M, 300, seed=7, partition=partition))
    save_trace(tmp_path / "b.npz", make_trace(spec, M, 300, seed=7, partition=partition))
    save_trace(tmp_path / "c.npz", make_trace(spec, M, 300, seed=8, partition=partition))
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    assert (tmp_path / "a.npz").read_bytes() != (tmp_path / "c.npz").read_bytes()
    original, loaded = make_trace(spec, M, 300, seed=7, partition=partition), load_trace(tmp_path / "a.npz")
    assert np.array_equal(loaded.available, original.available)
    assert (loaded.prob is None) == (original.prob is None)
    if loaded.prob is not None:
        assert loaded.prob.dtype == np.float32 and np.array_equal(loaded.prob, original.prob)
    assert np.array_equal(loaded.snapshot, original.snapshot) and loaded.snapshot.dtype == np.int64
    assert loaded.params == original.params and loaded.params["seed"] == 7


def test_odd_client_count_survives_bit_packing(tmp_path):
    trace = make_trace({"model": "bernoulli", "p": 0.5}, 13, 40, seed=0)
    save_trace(tmp_path / "t.npz", trace)
    assert np.array_equal(load_trace(tmp_path / "t.npz").available, trace.available)


def test_figure(partition, tmp_path):
    plot_trace(make_trace({"model": "fedswe", "dynamics": "staircase"}, M, 200, 0, partition), tmp_path / "t.png")
    plot_trace(make_trace({"model": "fast", "distribution": "beta"}, M, 200, 0), tmp_path / "f.png", clients=[0, 5])
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "f.png").stat().st_size > 0


@pytest.mark.parametrize(
    "spec, key",
    [
        ({"model": "oracle"}, "model"),
        ({"model": "fedswe", "dynamics": "chaotic"}, "dynamics"),
        ({"model": "fedswe", "period": 0}, "period"),
        ({"model": "fedswe", "window": 0}, "window"),
        ({"model": "fedswe", "gamma": 1.5}, "gamma"),
        ({"model": "fedswe", "phi_max": [1.0, 2.0]}, "phi_max"),
        ({"model": "fedswe", "inner": "sine"}, "inner"),
        ({"model": "fedswe", "perod": 20}, "perod"),
        ({"model": "fast"}, "distribution"),
        ({"model": "fast", "distribution": "pareto"}, "distribution"),
        ({"model": "fast", "distribution": "beta", "fraction": 0}, "fraction"),
        ({"model": "bernoulli", "p": 1.2}, "p"),
        ({"model": "bernoulli", "p": [0.5, -0.1]}, "p"),
        ({"model": "markov", "p_on": 0.1}, "p_off"),
        ({"model": "markov", "p_on": 0.0, "p_off": 0.0}, "p_on"),
        ({"model": "cyclic", "groups": 0, "p": 0.5}, "groups"),
        ({"model": "bernoulli", "p": 0.5, "snapshot_size": 0}, "snapshot_size"),
    ],
)
def test_invalid_specs_name_the_key(spec, key):
    with pytest.raises(ValueError, match=f"'{key}'"):
        resolve_trace(spec)


def test_workflow_keys_are_accepted_and_checked(partition):
    spec = {"model": "fedswe", "partition": "mnist_dir0.1", "num_clients": M, "rounds": 50}
    resolve_trace(spec)
    trace = make_trace(spec, M, 50, seed=0, partition=partition)
    assert trace.params["partition"] == "mnist_dir0.1" and trace.params["partition_params"] == partition.params
    with pytest.raises(ValueError, match="'rounds'"):
        make_trace(spec, M, 60, seed=0, partition=partition)
    with pytest.raises(ValueError, match="'num_clients'"):
        resolve_trace({"model": "bernoulli", "p": 0.5, "num_clients": 0})


def test_an_unknown_model_is_refused_naming_the_known_ones():
    known = re.escape(repr(tuple(TRACE_MODELS)))
    with pytest.raises(ValueError, match=f"trace spec key 'model': 'weekly' is not one of {known}"):
        make_trace({"model": "weekly", "groups": 2, "p": 0.5}, M, 10, seed=0)
