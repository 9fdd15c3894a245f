"""Partition schemes, torch-free: one frozen dataclass per scheme with its settings (each default written here only),
their checks and how it splits the samples (`split`; fedavail.partitions.partition makes, stores and plots the partitions).
A config's partition entry is `dataset` plus `scheme` plus the scheme's settings.

Class-pool exhaustion (client_dirichlet with equal sizes, balanced_dirichlet) is resolved in passes: each client asks
for its unmet count over the classes that still have samples; a class asked for more than it has grants its samples to a
uniformly random subset of the asked units (a multivariate hypergeometric draw, i.e. FedLab's random order of per-sample
draws); refused units are asked again in the next pass from ν_i renormalised over the classes still available or, where
ν_i has no mass left there (small α underflows to exact zeros), from the remaining class pool sizes. Each pass either
satisfies everyone or empties a class, so at most C passes run."""

from dataclasses import dataclass, replace
from functools import partial
from typing import ClassVar

import numpy as np

from fedavail.options import Registry, check_fields, check_int, is_number, must, option, resolve_variant

WHAT = "partition spec key"
ALLOCATIONS = ("equal", "class_proportional")
PARTITION_SCHEMES = Registry(f"{WHAT} 'scheme'")

_ALLOCATION = ("equal: client sizes N/m, per-class counts rounded from ν_i·n_i; class_proportional: each class split "
               "among clients in proportion to ν_{i,c} (the FedAWE/FedAU code; unequal sizes)")


@dataclass(frozen=True, kw_only=True)
class Scheme:
    DRAWS_NU: ClassVar[bool] = False  # whether it draws a class mix ν_i per client (the fedswe trace model reads it)

    def __post_init__(self):
        check_fields(self, WHAT)

    def for_classes(self, num_classes: int) -> "Scheme":
        """The settings whose default depends on the dataset's number of classes, filled in."""
        return self

    def split(self, labels: np.ndarray, rng: np.random.Generator, num_classes: int, seed: int,
              groups: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        """(owner[j]: the client of sample j or -1, ν [m, C] or None) for these labels (int64 in [0, C)), drawing from
        the partition's generator (`seed` made it), with the per-sample group ids (or None)."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class DirichletScheme(Scheme):
    num_clients: int = option(doc="number of clients m", check=check_int)
    alpha: float = option(doc="Dirichlet concentration α (smaller: more heterogeneous clients)",
                          check=must("a positive number", lambda v: is_number(v) and v > 0))


@PARTITION_SCHEMES.add("client_dirichlet")
@dataclass(frozen=True, kw_only=True)
class ClientDirichlet(DirichletScheme):
    """ν_i ~ Dir(α·1_C) per client (FedSWE, Hsu et al. 2019, arXiv 1909.06335)."""

    DRAWS_NU = True

    allocation: str = option("equal", _ALLOCATION, choices=ALLOCATIONS)

    def split(self, labels, rng, num_classes, seed, groups):
        return _dirichlet(labels, rng, num_classes, self.num_clients, self.alpha, self.allocation)


@PARTITION_SCHEMES.add("balanced_dirichlet")
@dataclass(frozen=True, kw_only=True)
class BalancedDirichlet(DirichletScheme):
    """Sizes N/m, every sample's class drawn from ν_i ~ Dir(α·1_C) (FAST, via FedLab)."""

    DRAWS_NU = True

    def split(self, labels, rng, num_classes, seed, groups):
        return _dirichlet(labels, rng, num_classes, self.num_clients, self.alpha, "equal", multinomial=True)


@PARTITION_SCHEMES.add("hetero_dirichlet")
@dataclass(frozen=True, kw_only=True)
class HeteroDirichlet(DirichletScheme):
    """Per class, shares ~ Dir(α·1_m) over the clients, retried until every client holds min_size samples (FedLab's
    hetero_dir_partition, FAST's Fashion-MNIST code)."""

    min_size: int | None = option(None, "samples every client holds at least; null: the number of classes",
                                  check=partial(check_int, minimum=0))
    max_retries: int = option(1_000_000, "attempts before giving up with an error (FedLab retries forever; at α = 0.05 "
                                         "with 100 clients about 1 in 20,000 passes)", check=check_int)

    def for_classes(self, num_classes: int) -> "HeteroDirichlet":
        return self if self.min_size is not None else replace(self, min_size=num_classes)  # FedLab's default

    def split(self, labels, rng, num_classes, seed, groups):
        """FedLab's hetero_dir_partition, retried as FedLab retries it (max_retries), on the count table alone.

        One attempt, class by class: shares ~ Dir(α·1_m) over all clients, zeroed for the clients that already hold
        N/m samples or more and renormalised; the class's samples are cut at floor(cumsum(shares)·n_c). An attempt is
        accepted when every client holds at least min_size samples; one whose open clients all draw a share of exactly
        0 (underflow at small α; FedLab divides 0 by 0) is rejected. Acceptance depends only on the counts, so the
        samples are drawn once, for the accepted table (which samples a client gets is uniform given its counts, as
        FedLab's shuffle makes it)."""
        m, alpha, min_size = self.num_clients, self.alpha, self.min_size
        if labels.size < m * min_size:
            raise ValueError(f"{WHAT} 'min_size': {m} clients x {min_size} exceeds the {labels.size} samples")
        supply = np.bincount(labels, minlength=num_classes)
        for _attempt in range(self.max_retries):
            counts = np.zeros((m, num_classes), dtype=np.int64)
            sizes = np.zeros(m, dtype=np.int64)
            for c, n_c in enumerate(supply):
                shares = rng.dirichlet(np.full(m, float(alpha))) * (sizes < labels.size / m)
                total = shares.sum()
                if total == 0:
                    break
                cuts = (np.cumsum(shares / total) * n_c).astype(np.int64)[:-1]
                counts[:, c] = np.diff(np.concatenate([[0], cuts, [n_c]]))
                sizes += counts[:, c]
            else:
                if sizes.min() >= min_size:
                    return _owners_from_counts(labels, counts, rng), None
        raise ValueError(f"{WHAT} 'max_retries': hetero_dirichlet with alpha={alpha}, {m} clients and "
                         f"min_size={min_size} found no split after {self.max_retries} attempts (seed {seed}); raise "
                         f"max_retries or alpha, or lower min_size")


@PARTITION_SCHEMES.add("two_group")
@dataclass(frozen=True, kw_only=True)
class TwoGroup(DirichletScheme):
    """Clients [0, m/2) hold only classes [0, C/2), the others the rest; client_dirichlet inside each group (FedSWE
    §7.1)."""

    DRAWS_NU = True

    num_clients: int = option(doc="number of clients m, at least 2 (one per group)",
                              check=partial(check_int, minimum=2))
    allocation: str = option("equal", _ALLOCATION, choices=ALLOCATIONS)

    def split(self, labels, rng, num_classes, seed, groups):
        if num_classes < 2:
            raise ValueError("partition scheme 'two_group' needs at least 2 classes")
        owner = np.full(labels.size, -1, dtype=np.int64)
        nu = np.zeros((self.num_clients, num_classes))
        client_halves = np.split(np.arange(self.num_clients), [self.num_clients // 2])
        for clients, classes in zip(client_halves, np.split(np.arange(num_classes), [num_classes // 2])):
            members = np.flatnonzero((labels >= classes[0]) & (labels <= classes[-1]))
            if members.size < clients.size:
                raise ValueError(f"{WHAT} 'num_clients': a group of {clients.size} clients has {members.size} samples")
            group_owner, group_nu = _dirichlet(labels[members] - classes[0], rng, classes.size, clients.size,
                                               self.alpha, self.allocation)
            owner[members] = clients[0] + group_owner
            nu[np.ix_(clients, classes)] = group_nu  # ν_i is zero outside the group's classes
        return owner, nu


@PARTITION_SCHEMES.add("natural")
@dataclass(frozen=True, kw_only=True)
class Natural(Scheme):
    """One client per natural group (a Shakespeare role)."""

    num_clients: int | None = option(None, "keep only this many groups, those with the most samples; null: all",
                                     check=check_int)

    def split(self, labels, rng, num_classes, seed, groups):
        if groups is None:
            raise ValueError("partition scheme 'natural' needs per-sample group ids (the dataset's train_groups)")
        groups = np.asarray(groups, dtype=np.int64)
        if groups.shape != labels.shape:
            raise ValueError(f"groups has shape {groups.shape}, labels {labels.shape}")
        group_ids, sample_group, counts = np.unique(groups[groups >= 0], return_inverse=True, return_counts=True)
        if group_ids.size == 0:
            raise ValueError("partition scheme 'natural': no sample has a group id >= 0")
        if self.num_clients is not None and self.num_clients > group_ids.size:
            raise ValueError(f"{WHAT} 'num_clients': {self.num_clients} > the {group_ids.size} natural groups")
        keep = group_ids.size if self.num_clients is None else self.num_clients
        # The largest groups, then renumbered in group-id order so client order follows the dataset's group order.
        kept = np.sort(np.argsort(-counts, kind="stable")[:keep])
        client_of_group = np.full(group_ids.size, -1, dtype=np.int64)
        client_of_group[kept] = np.arange(keep)
        owner = np.full(labels.size, -1, dtype=np.int64)
        owner[groups >= 0] = client_of_group[sample_group]
        return owner, None


SCHEMES_DRAWING_NU = tuple(name for name, scheme in PARTITION_SCHEMES.items() if scheme.DRAWS_NU)


def resolve_partition(spec: dict) -> Scheme:
    """A partition spec (`scheme` and its settings, no `dataset`) checked, as its scheme's dataclass; raise
    ValueError naming the offending key."""
    return resolve_variant(spec, PARTITION_SCHEMES, "scheme", WHAT, "partition")


def _dirichlet(labels, rng, num_classes, m, alpha, allocation, multinomial=False):
    """ν_i ~ Dir(α·1_C) per client. client_dirichlet (FedSWE, Hsu et al. 2019): sizes N/m (differing by at most one),
    client i's per-class counts the largest-remainder rounding of ν_i·n_i. balanced_dirichlet (FAST via FedLab's
    client_inner_dirichlet_partition, from FedDyn): sizes N/m, every sample's class drawn from ν_i, so the counts are
    multinomial."""
    nu = rng.dirichlet(np.full(num_classes, float(alpha)), size=m)
    supply = np.bincount(labels, minlength=num_classes)
    if allocation == "class_proportional":
        # Each class split by ν_{i,c}/Σ_j ν_{j,c}, cut at the rounded cumulative shares as the FedAWE code cuts it
        # (mingxiang12/FedAWE `util/util.py`, partition); a class nobody draws is split uniformly.
        class_mass = nu.sum(axis=0)
        drawn = class_mass > 0
        cumulative = np.where(drawn, np.cumsum(nu, axis=0) / np.where(drawn, class_mass, 1.0),
                              np.arange(1, m + 1)[:, None] / m)
        ends = np.round(supply * cumulative).astype(np.int64)
        counts = np.diff(np.vstack([np.zeros((1, num_classes), dtype=np.int64), ends]), axis=0)
    else:
        sizes = labels.size // m + (np.arange(m) < labels.size % m)  # N/m, the first N mod m clients one more
        counts = _fill_quotas(sizes, supply, nu, rng, multinomial)
    return _owners_from_counts(labels, counts, rng), nu


def _round_rows(weights: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Largest-remainder rounding of each row of `weights` (rows sum to 1) times `totals`, so rows sum to totals."""
    exact = weights * totals[:, None]
    counts = np.floor(exact).astype(np.int64)
    short = totals - counts.sum(axis=1)
    # Rank 0 = largest remainder; zero weights rank last, so rounding never asks for a closed class.
    remainder_order = np.where(weights > 0, counts - exact, np.inf)
    rank = np.argsort(np.argsort(remainder_order, axis=1, kind="stable"), axis=1, kind="stable")
    return counts + (rank < short[:, None])


def _owners_from_counts(labels: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """owner[j] for every sample, given counts[i, c] samples of class c for client i, drawn without replacement."""
    owner = np.full(labels.size, -1, dtype=np.int64)
    for c in range(counts.shape[1]):
        pool = rng.permutation(np.flatnonzero(labels == c))
        takers = np.repeat(np.arange(counts.shape[0]), counts[:, c])
        owner[pool[: takers.size]] = takers
    return owner


def _fill_quotas(need: np.ndarray, supply: np.ndarray, nu: np.ndarray, rng: np.random.Generator,
                 multinomial: bool) -> np.ndarray:
    """counts[i, c] with rows summing to need and columns to at most supply (module docstring: exhaustion passes)."""
    counts = np.zeros_like(nu, dtype=np.int64)
    need, supply = need.copy(), supply.copy()
    while need.sum() > 0:
        open_classes = supply > 0
        weights = nu * open_classes
        weights = np.where(weights.sum(axis=1, keepdims=True) > 0, weights, supply * open_classes)
        weights = weights / weights.sum(axis=1, keepdims=True)
        demand = rng.multinomial(need, weights) if multinomial else _round_rows(weights, need)
        granted = demand.copy()
        for c in np.flatnonzero(demand.sum(axis=0) > supply):
            granted[:, c] = rng.multivariate_hypergeometric(demand[:, c], supply[c])
        counts += granted
        need -= granted.sum(axis=1)
        supply -= granted.sum(axis=0)
    return counts

