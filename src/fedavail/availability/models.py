"""Availability models: per-round probabilities p_i^t and the participation samplers that draw from them.

Pure functions of their arguments and an explicit numpy Generator; traces.py wires them to specs and files.
Shapes: T rounds, m clients, n cohort size. Probabilities are float64 [T, m]; availability is bool [T, m].
Sources: FedSWE (arXiv 2609.04763 §7, Appendix H.2) and FAST's cohorts (OpenReview H3AUl3pnlu §3.2).
"""

import numpy as np

# FAST's skewed index distributions (RogerRogerUSC/FAST `shared/client_sampling.py`): a client index is ⌊m·Z⌋.
SKEWED_DISTRIBUTIONS = {
    "beta": lambda rng, size: rng.beta(1.0, 10.0, size),
    "gamma": lambda rng, size: rng.gamma(shape=10.0, scale=0.01, size=size),
    "weibull": lambda rng, size: rng.weibull(10.0, size) / 1.2,
}
# Index draws per cohort slot in a round's first block; a short block is redrawn 4x larger, up to a cap on the draws
# held at once (bounds memory, and ends the search when the distribution cannot give n distinct indices).
_DRAWS_PER_SLOT = 8
_MAX_DRAWS_AT_ONCE = 4_000_000


def default_phi_max(num_classes: int) -> np.ndarray:
    """Φ_c = 1 for the first half of the classes, 0.5 for the rest (Appendix H.2)."""
    return np.where(np.arange(num_classes) < num_classes // 2, 1.0, 0.5)


def fedswe_base_probabilities(class_mix: np.ndarray, phi_max: np.ndarray,
                              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """p_i = <ν_i, φ> with φ_c ~ U(0, Φ_c). Returns (p [m], φ [C])."""
    phi = rng.uniform(0.0, 1.0, size=len(phi_max)) * phi_max
    return class_mix @ phi, phi


def modulation(dynamics: str, rounds: int, period: int, low: float, gamma: float) -> np.ndarray:
    """f(t) [T] (H.2): stationary 1; staircase 1 in the first half of each period P and `low` in the second (the
    code's r//10 mod 2 for P = 20); sine γ sin(2πt/P) + 1 − γ."""
    t = np.arange(rounds)
    if dynamics == "staircase":
        return np.where(t % period < period / 2, 1.0, low)
    if dynamics == "sine":
        return gamma * np.sin(2 * np.pi * t / period) + 1.0 - gamma
    return np.ones(rounds)


def two_group_windows(rounds: int, num_clients: int, window: int) -> np.ndarray:
    """bool [T, m]: clients [0, m//2) may be available in the first half of every window of Pδ rounds, the rest in
    the second half (eqs. 31-32). Halves are [0, Pδ/2) and [Pδ/2, Pδ), equal as in Fig. 6's caption; eq. 31's
    `≤ Pδ/2` would give the first group one extra round."""
    first_half = (np.arange(rounds) % window) < window / 2
    first_group = np.arange(num_clients) < num_clients // 2
    return first_half[:, None] == first_group[None, :]


def bernoulli_availability(prob: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """a_i^t ~ Bernoulli(p_i^t), independent across clients and rounds."""
    return rng.random(prob.shape) < prob


def cyclic_windows(rounds: int, num_clients: int, groups: int, active_rounds: int) -> np.ndarray:
    """bool [T, m]: client i (group ⌊iK/m⌋) may be available when ⌊t/active_rounds⌋ mod K is its group (FedSWE
    eq. 4 for active_rounds = 1; IBM's cyclic participation keeps a group active for several rounds)."""
    group_of_client = np.arange(num_clients) * groups // num_clients
    active_group = (np.arange(rounds) // active_rounds) % groups
    return active_group[:, None] == group_of_client[None, :]


def markov_availability(p_on: np.ndarray, p_off: np.ndarray, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """Two-state chain per client: off→on with probability p_on, on→off with p_off; round 0 drawn from the
    stationary law π = p_on/(p_on + p_off), so P(a_i^t = 1) = π_i in every round."""
    stationary = p_on / (p_on + p_off)
    uniforms = rng.random((rounds, len(p_on)))
    available = np.empty((rounds, len(p_on)), dtype=bool)
    available[0] = uniforms[0] < stationary
    for t in range(1, rounds):
        stay_on = available[t - 1] & (uniforms[t] >= p_off)
        turn_on = ~available[t - 1] & (uniforms[t] < p_on)
        available[t] = stay_on | turn_on
    return available


def uniform_cohorts(rounds: int, num_clients: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """int64 [T, n]: per round n distinct clients uniformly at random, sorted ascending."""
    cohorts = np.argsort(rng.random((rounds, num_clients)), axis=1)[:, :size]
    return np.sort(cohorts, axis=1).astype(np.int64)


def skewed_cohorts(distribution: str, rounds: int, num_clients: int, size: int,
                   rng: np.random.Generator) -> np.ndarray:
    """int64 [T, n]: per round the first n distinct in-range indices ⌊m·Z⌋ of an i.i.d. stream of Z (the authors'
    rejection loop: an index ≥ m or already drawn is skipped), sorted ascending.

    Vectorised: a chunk of rounds draws a block of Z per round at once; a round whose block holds fewer than n
    distinct valid indices redraws a larger block, which leaves the law unchanged because the stream is i.i.d."""
    cohorts = np.empty((rounds, size), dtype=np.int64)
    block = _DRAWS_PER_SLOT * size
    chunk = max(1, _MAX_DRAWS_AT_ONCE // block)
    for start in range(0, rounds, chunk):
        pending, block_size = np.arange(start, min(start + chunk, rounds)), block
        while pending.size:
            filled, complete = _first_distinct(distribution, pending.size, block_size, num_clients, size, rng)
            cohorts[pending[complete]] = filled
            pending = pending[~complete]
            grown = min(4 * block_size, _MAX_DRAWS_AT_ONCE // max(pending.size, 1))
            if pending.size and grown <= block_size:
                raise ValueError(f"trace spec key 'fraction': {distribution} index draws cannot fill a cohort of "
                                 f"{size} distinct clients out of {num_clients} (the distribution concentrates on "
                                 "too few indices)")
            block_size = grown
    return np.sort(cohorts, axis=1)


def _first_distinct(distribution, rows, block, num_clients, size, rng) -> tuple[np.ndarray, np.ndarray]:
    """For `rows` streams of `block` draws each: the first `size` distinct valid indices of every stream that has
    them ([complete rows, size]), and which rows are complete."""
    index = np.floor(num_clients * SKEWED_DISTRIBUTIONS[distribution](rng, (rows, block))).astype(np.int64)
    row, position = np.nonzero((index >= 0) & (index < num_clients))  # row-major: positions ascend within a row
    _, first = np.unique(row * num_clients + index[row, position], return_index=True)  # first (row, client) pairs
    first = np.sort(first)
    first_row = row[first]
    distinct = np.bincount(first_row, minlength=rows)
    rank = np.arange(first.size) - np.repeat(np.cumsum(distinct) - distinct, distinct)
    complete = distinct >= size
    take = first[complete[first_row] & (rank < size)]
    return index[row[take], position[take]].reshape(-1, size), complete


def cohort_mask(cohorts: np.ndarray, num_clients: int) -> np.ndarray:
    """bool [T, m] with True where a client is in the round's cohort."""
    mask = np.zeros((cohorts.shape[0], num_clients), dtype=bool)
    np.put_along_axis(mask, cohorts, True, axis=1)
    return mask
