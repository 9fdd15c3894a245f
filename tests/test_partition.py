import re

import numpy as np
import pytest

from fedavail.partitions.partition import (load_partition, make_partition, partition_stats, plot_partition,
                                           save_partition)
from fedavail.partitions.schemes import PARTITION_SCHEMES, resolve_partition

NUM_CLASSES = 10


@pytest.fixture(scope="module")
def labels():
    # Unequal class sizes (like SVHN) and a total that 100 clients do not divide.
    counts = np.arange(10, 0, -1) * 200 + 7
    return np.random.default_rng(123).permutation(np.repeat(np.arange(NUM_CLASSES), counts))


def assert_covers_exactly_once(part, labels):
    assert np.array_equal(np.sort(part.indices), np.arange(labels.size))
    assert part.offsets[0] == 0 and part.offsets[-1] == labels.size


def assert_consistent(part, labels):
    for i in range(part.num_clients):
        held = part.client(i)
        assert np.all(np.diff(held) > 0)
        assert np.array_equal(np.bincount(labels[held], minlength=NUM_CLASSES), part.label_hist[i])
    assert np.array_equal(part.sizes, part.label_hist.sum(axis=1))


@pytest.mark.parametrize("scheme", ["client_dirichlet", "balanced_dirichlet", "two_group"])
@pytest.mark.parametrize("alpha", [0.01, 0.1, 1.0, 100.0])
def test_equal_size_schemes_cover_every_sample_once(labels, scheme, alpha):
    part = make_partition(labels, NUM_CLASSES, {"scheme": scheme, "num_clients": 100, "alpha": alpha}, seed=0)
    assert part.num_clients == 100
    assert_covers_exactly_once(part, labels)
    assert_consistent(part, labels)
    if scheme == "two_group":  # equal sizes within each group
        assert np.ptp(part.sizes[:50]) <= 1 and np.ptp(part.sizes[50:]) <= 1
    else:
        assert np.ptp(part.sizes) <= 1
        assert part.sizes.sum() == labels.size
    assert np.allclose(part.nu.sum(axis=1), 1.0)


def test_two_group_clients_hold_only_their_groups_classes(labels):
    part = make_partition(labels, NUM_CLASSES, {"scheme": "two_group", "num_clients": 100, "alpha": 0.1}, seed=3)
    assert part.label_hist[:50, 5:].sum() == 0 and part.label_hist[50:, :5].sum() == 0
    assert part.nu[:50, 5:].sum() == 0 and part.nu[50:, :5].sum() == 0


def test_class_proportional_allocation_follows_nu(labels):
    spec = {"scheme": "client_dirichlet", "num_clients": 20, "alpha": 0.5, "allocation": "class_proportional"}
    part = make_partition(labels, NUM_CLASSES, spec, seed=1)
    assert_covers_exactly_once(part, labels)
    class_sizes = np.bincount(labels, minlength=NUM_CLASSES)
    expected = part.nu / part.nu.sum(axis=0) * class_sizes
    assert np.all(np.abs(part.label_hist - expected) <= 1.0)


def test_class_proportional_counts_are_the_fedawe_codes(labels):
    # mingxiang12/FedAWE util/util.py: client n takes class i's samples up to round(n_i Σ_{j<=n} ν_ji / Σ_j ν_ji).
    spec = {"scheme": "client_dirichlet", "num_clients": 100, "alpha": 0.1, "allocation": "class_proportional"}
    part = make_partition(labels, NUM_CLASSES, spec, seed=5)
    class_sizes = np.bincount(labels, minlength=NUM_CLASSES)
    expected = np.zeros((100, NUM_CLASSES), dtype=np.int64)
    start = np.zeros(NUM_CLASSES, dtype=np.int64)
    for n in range(100):
        for i in range(NUM_CLASSES):
            end = int(np.round(class_sizes[i] * np.sum(part.nu[:n + 1, i]) / np.sum(part.nu[:, i])))
            expected[n, i] = end - start[i]
            start[i] = end
    assert np.array_equal(part.label_hist, expected)


@pytest.mark.parametrize("alpha", [0.1, 1.0])
def test_hetero_dirichlet_reaches_min_size(labels, alpha):
    spec = {"scheme": "hetero_dirichlet", "num_clients": 100, "alpha": alpha}
    part = make_partition(labels, NUM_CLASSES, spec, seed=0)
    assert_covers_exactly_once(part, labels)
    assert_consistent(part, labels)
    assert part.sizes.min() >= NUM_CLASSES  # FedLab's default min_require_size
    assert part.nu is None


def fedlab_hetero_dir_counts(targets, num_clients, num_classes, dir_alpha, min_require_size, rng, shuffle_rng):
    """FedLab's hetero_dir_partition (fedlab/utils/dataset/functional.py) transcribed with explicit generators; the
    per-class shuffle draws from its own generator: it decides which samples a client gets, never how many."""
    num_samples = targets.shape[0]
    min_size = 0
    while min_size < min_require_size:
        idx_batch = [[] for _ in range(num_clients)]
        for k in range(num_classes):
            idx_k = np.where(targets == k)[0]
            shuffle_rng.shuffle(idx_k)
            proportions = rng.dirichlet(np.repeat(dir_alpha, num_clients))
            proportions = np.array([p * (len(idx_j) < num_samples / num_clients)
                                    for p, idx_j in zip(proportions, idx_batch)])
            proportions = proportions / proportions.sum()
            proportions = (np.cumsum(proportions) * len(idx_k)).astype(int)[:-1]
            idx_batch = [idx_j + idx.tolist() for idx_j, idx in zip(idx_batch, np.split(idx_k, proportions))]
            min_size = min([len(idx_j) for idx_j in idx_batch])
    return np.array([np.bincount(targets[idx_j], minlength=num_classes) for idx_j in idx_batch])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hetero_dirichlet_accepts_exactly_the_count_tables_fedlab_accepts(seed):
    # α = 0.05 (FAST's headline Fashion-MNIST cell) on 600 samples per class and 30 clients, where ~2% of attempts
    # pass: the accepted table after the same Dirichlet draws is FedLab's, attempt for attempt.
    from fedavail.rng import numpy_generator

    targets = np.repeat(np.arange(NUM_CLASSES), 600)
    spec = {"scheme": "hetero_dirichlet", "num_clients": 30, "alpha": 0.05}
    part = make_partition(targets, NUM_CLASSES, spec, seed=seed)
    expected = fedlab_hetero_dir_counts(targets, 30, NUM_CLASSES, 0.05, NUM_CLASSES, numpy_generator(seed, "partition"),
                                        np.random.default_rng(99))
    assert np.array_equal(part.label_hist, expected)
    assert_covers_exactly_once(part, targets)


def test_hetero_dirichlet_that_finds_no_split_names_alpha_seed_and_limit(labels):
    spec = {"scheme": "hetero_dirichlet", "num_clients": 100, "alpha": 0.01, "max_retries": 50}
    with pytest.raises(ValueError, match=r"alpha=0\.01.*after 50 attempts \(seed 4\)"):
        make_partition(labels, NUM_CLASSES, spec, seed=4)


@pytest.mark.parametrize("scheme", ["client_dirichlet", "balanced_dirichlet", "hetero_dirichlet", "two_group"])
def test_heterogeneity_grows_as_alpha_shrinks(labels, scheme):
    # hetero_dirichlet at α = 0.01 finds no split with every client at min_size (as FedLab's, which loops forever).
    alphas = (100.0, 1.0, 0.3, 0.1) if scheme == "hetero_dirichlet" else (100.0, 1.0, 0.1, 0.01)
    entropy = [
        partition_stats(make_partition(labels, NUM_CLASSES, {"scheme": scheme, "num_clients": 50, "alpha": a}, 7))
        .label_entropy.mean()
        for a in alphas
    ]
    assert np.all(np.diff(entropy) < 0), entropy


def test_natural_one_client_per_group_and_cap(labels):
    groups = np.arange(labels.size) % 7
    groups[:30] = 6  # group 6 becomes the largest
    groups[-5:] = -1  # unassigned samples stay out
    part = make_partition(labels, NUM_CLASSES, {"scheme": "natural"}, seed=0, groups=groups)
    assert part.num_clients == 7 and part.nu is None
    assert part.sizes.sum() == labels.size - 5
    for client in range(7):
        assert np.all(groups[part.client(client)] == client)
    capped = make_partition(labels, NUM_CLASSES, {"scheme": "natural", "num_clients": 2}, seed=0, groups=groups)
    biggest = np.argsort(-np.bincount(groups[groups >= 0]), kind="stable")[:2]
    assert sorted(set(groups[capped.indices])) == sorted(biggest)


def test_same_seed_same_bytes_and_round_trip(labels, tmp_path):
    spec = {"scheme": "client_dirichlet", "num_clients": 30, "alpha": 0.1}
    save_partition(tmp_path / "a.npz", make_partition(labels, NUM_CLASSES, spec, seed=5))
    save_partition(tmp_path / "b.npz", make_partition(labels, NUM_CLASSES, spec, seed=5))
    save_partition(tmp_path / "c.npz", make_partition(labels, NUM_CLASSES, spec, seed=6))
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    assert (tmp_path / "a.npz").read_bytes() != (tmp_path / "c.npz").read_bytes()
    loaded = load_partition(tmp_path / "a.npz")
    original = make_partition(labels, NUM_CLASSES, spec, seed=5)
    for field in ("offsets", "indices", "label_hist", "nu"):
        assert np.array_equal(getattr(loaded, field), getattr(original, field))
    assert loaded.params == original.params
    assert loaded.params["alpha"] == 0.1 and loaded.params["seed"] == 5
    assert loaded.params["num_classes"] == NUM_CLASSES
    assert list(tmp_path.glob(".*tmp")) == []


def test_stats_and_figure(labels, tmp_path):
    part = make_partition(labels, NUM_CLASSES, {"scheme": "balanced_dirichlet", "num_clients": 100, "alpha": 0.1}, 0)
    stats = partition_stats(part)
    assert len(stats) == 100
    assert {"client", "size", "num_classes", "label_entropy", "dominant_class", "dominant_share"} <= set(stats)
    assert np.array_equal(stats["size"], part.sizes)
    plot_partition(part, tmp_path / "fig.png")
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "spec, key",
    [
        ({"scheme": "pathological", "num_clients": 10, "alpha": 1.0}, "scheme"),
        ({"scheme": "client_dirichlet", "num_clients": 10, "alpha": 0.0}, "alpha"),
        ({"scheme": "client_dirichlet", "num_clients": 10, "alpha": -1}, "alpha"),
        ({"scheme": "client_dirichlet", "num_clients": 0, "alpha": 1.0}, "num_clients"),
        ({"scheme": "client_dirichlet", "num_clients": 10}, "alpha"),
        ({"scheme": "balanced_dirichlet", "alpha": 1.0}, "num_clients"),
        ({"scheme": "client_dirichlet", "num_clients": 10, "alpha": 1.0, "alhpa": 1.0}, "alhpa"),
        ({"scheme": "client_dirichlet", "num_clients": 10, "alpha": 1.0, "allocation": "random"}, "allocation"),
        ({"scheme": "hetero_dirichlet", "num_clients": 10, "alpha": 1.0, "max_retries": 0}, "max_retries"),
        ({"scheme": "natural", "num_clients": 2.5}, "num_clients"),
    ],
)
def test_invalid_specs_name_the_key(spec, key):
    with pytest.raises(ValueError, match=f"'{key}'"):
        resolve_partition(spec)


def test_impossible_requests_raise(labels):
    with pytest.raises(ValueError, match="'min_size'"):
        spec = {"scheme": "hetero_dirichlet", "num_clients": 10, "alpha": 1.0, "min_size": 10**6}
        make_partition(labels, NUM_CLASSES, spec, seed=0)
    with pytest.raises(ValueError, match="groups"):
        make_partition(labels, NUM_CLASSES, {"scheme": "natural"}, seed=0)


def test_an_unknown_scheme_is_refused_naming_the_known_ones(labels):
    known = re.escape(repr(tuple(PARTITION_SCHEMES)))
    with pytest.raises(ValueError, match=f"partition spec key 'scheme': 'iid' is not one of {known}"):
        make_partition(labels, NUM_CLASSES, {"scheme": "iid", "num_clients": 10}, seed=0)


@pytest.mark.parametrize("scheme", list(PARTITION_SCHEMES))
def test_a_scheme_stores_nu_exactly_when_it_declares_it_draws_one(labels, scheme):
    spec = {"scheme": scheme} if scheme == "natural" else {"scheme": scheme, "num_clients": 10, "alpha": 1.0}
    part = make_partition(labels, NUM_CLASSES, spec, seed=0, groups=np.arange(labels.size) % 7)
    assert (part.nu is not None) == PARTITION_SCHEMES[scheme].DRAWS_NU
