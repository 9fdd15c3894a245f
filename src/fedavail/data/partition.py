"""Client partitions of a training set: who holds which sample.

A partition is stored as CSR (client i holds indices[offsets[i]:offsets[i+1]], sorted ascending), with the
per-client label histogram, the client class mix ν_i where the scheme draws one (FedSWE's availability
p_i = <ν_i, φ> needs it), and the spec that made it. Every scheme (fedavail.plan.partitions) assigns each train sample
at most once, the Dirichlet schemes exactly once.

Class-pool exhaustion (client_dirichlet with equal sizes, balanced_dirichlet): demands are granted in passes. In a pass
every client asks for its unmet count over the classes that still have samples; a class asked for more than it has
grants its samples to a uniformly random subset of the asked units (a multivariate hypergeometric draw, i.e. FedLab's
random order of per-sample draws); a client's refused units are asked again in the next pass from ν_i renormalised
over the classes still available. If ν_i has no mass left there (small α underflows to exact zeros), the refused units
follow the remaining class pool sizes instead. Each pass either satisfies everyone or empties a class, so at most C
passes run.
"""

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fedavail.io import atomic_path, reading, write_npz
from fedavail.plan.options import Registry
from fedavail.plan.partitions import resolve_partition
from fedavail.rng import numpy_generator

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Partition:
    offsets: np.ndarray  # int64 [m + 1]
    indices: np.ndarray  # int64 [total]
    label_hist: np.ndarray  # int64 [m, C]
    nu: np.ndarray | None  # float64 [m, C]: the drawn class mix ν_i, where the scheme draws one
    params: dict

    @property
    def num_clients(self) -> int:
        return len(self.offsets) - 1

    @property
    def num_classes(self) -> int:
        return self.label_hist.shape[1]

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def client(self, i: int) -> np.ndarray:
        return self.indices[self.offsets[i] : self.offsets[i + 1]]


# How each scheme (fedavail.plan.partitions.PARTITION_SCHEMES, same names) splits the samples: a function of the labels,
# the partition's generator, the per-sample group ids and its params (its full spec with seed and num_classes), taking
# the settings it reads as keywords, returning (owner[j]: the client of sample j or -1, ν [m, C] or None).
SPLITS = Registry("partition spec key 'scheme'")


def make_partition(labels: np.ndarray, num_classes: int, spec: dict, seed: int,
                   groups: np.ndarray | None = None) -> Partition:
    """Split the train samples with these labels among clients as `spec` says; randomness from (seed, "partition")."""
    scheme = resolve_partition(spec).for_classes(num_classes)
    labels = np.asarray(labels, dtype=np.int64)
    if labels.ndim != 1 or (labels.size and (labels.min() < 0 or labels.max() >= num_classes)):
        raise ValueError(f"labels must be a 1-D array of class ids in [0, {num_classes})")
    params = {"scheme": spec["scheme"], **asdict(scheme), "seed": int(seed), "num_classes": int(num_classes),
              "num_samples": int(labels.size)}
    m = params["num_clients"]
    if m is not None and labels.size < m:
        raise ValueError(f"partition spec key 'num_clients': {m} clients but only {labels.size} samples")
    owner, nu = SPLITS[spec["scheme"]](labels, numpy_generator(seed, "partition"), groups=groups, **params)
    m = int(owner.max()) + 1 if m is None else m
    assigned = np.flatnonzero(owner >= 0)  # owner[j] = -1: sample j unassigned
    indices = assigned[np.argsort(owner[assigned], kind="stable")]  # stable: ascending sample indices per client
    offsets = np.concatenate([[0], np.cumsum(np.bincount(owner[assigned], minlength=m))]).astype(np.int64)
    label_hist = np.zeros((m, num_classes), dtype=np.int64)
    np.add.at(label_hist, (owner[assigned], labels[assigned]), 1)
    return Partition(offsets, indices.astype(np.int64), label_hist, None if nu is None else np.asarray(nu, np.float64),
                     params)


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
        mass = weights.sum(axis=1, keepdims=True)
        # A client whose ν_i is (numerically) zero on every open class follows the remaining pool sizes.
        weights = np.where(mass > 0, weights, supply * open_classes)
        weights = weights / weights.sum(axis=1, keepdims=True)
        demand = rng.multinomial(need, weights) if multinomial else _round_rows(weights, need)
        granted = demand.copy()
        for c in np.flatnonzero(demand.sum(axis=0) > supply):
            granted[:, c] = rng.multivariate_hypergeometric(demand[:, c], supply[c])
        counts += granted
        need -= granted.sum(axis=1)
        supply -= granted.sum(axis=0)
    return counts


@SPLITS.add("client_dirichlet", "balanced_dirichlet")
def _dirichlet(labels, rng, *, scheme, num_classes, num_clients, alpha, allocation="equal", **_):
    """ν_i ~ Dir(α·1_C) per client. client_dirichlet (FedSWE, Hsu et al. 2019): sizes N/m (differing by at most one),
    client i's per-class counts the largest-remainder rounding of ν_i·n_i. balanced_dirichlet (FAST via FedLab's
    client_inner_dirichlet_partition, from FedDyn): sizes N/m, every sample's class drawn from ν_i, so the counts are
    multinomial."""
    m = num_clients
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
        sizes = np.full(m, labels.size // m, dtype=np.int64)
        sizes[: labels.size % m] += 1
        counts = _fill_quotas(sizes, supply, nu, rng, multinomial=scheme == "balanced_dirichlet")
    return _owners_from_counts(labels, counts, rng), nu


@SPLITS.add("two_group")
def _two_group(labels, rng, *, num_classes, num_clients, alpha, allocation, **_):
    """FedSWE §7.1: clients [0, m//2) hold only classes [0, C//2), the others the rest; client_dirichlet inside each
    group (ν_i is zero outside the group's classes)."""
    if num_classes < 2:
        raise ValueError("partition scheme 'two_group' needs at least 2 classes")
    owner = np.full(labels.size, -1, dtype=np.int64)
    nu = np.zeros((num_clients, num_classes))
    client_halves = np.split(np.arange(num_clients), [num_clients // 2])
    for clients, classes in zip(client_halves, np.split(np.arange(num_classes), [num_classes // 2])):
        members = np.flatnonzero((labels >= classes[0]) & (labels <= classes[-1]))
        if members.size < clients.size:
            raise ValueError(f"partition spec key 'num_clients': a group of {clients.size} clients has "
                             f"{members.size} samples")
        group_labels = labels[members] - classes[0]
        group_owner, group_nu = _dirichlet(group_labels, rng, scheme="client_dirichlet", num_classes=classes.size,
                                           num_clients=clients.size, alpha=alpha, allocation=allocation)
        owner[members] = clients[0] + group_owner
        nu[np.ix_(clients, classes)] = group_nu
    return owner, nu


@SPLITS.add("hetero_dirichlet")
def _hetero_dirichlet(labels, rng, *, num_classes, num_clients, alpha, min_size, max_retries, seed, **_):
    """FedLab's hetero_dir_partition, retried as FedLab retries it, on the count table alone.

    One attempt, class by class: shares ~ Dir(α·1_m) over all clients, zeroed for the clients that already hold N/m
    samples or more and renormalised; the class's samples are cut at floor(cumsum(shares)·n_c). An attempt is accepted
    when every client holds at least min_size samples. Acceptance depends only on the counts, so the samples are drawn
    once, for the accepted table (which samples a client gets is uniform given its counts, as FedLab's shuffle makes
    it). FedLab retries forever; at α = 0.05 with 100 Fashion-MNIST clients about 5e-5 of the attempts pass. An attempt
    whose open clients all draw a share of exactly 0 (underflow at small α; FedLab divides 0 by 0) is rejected.
    """
    m = num_clients
    if labels.size < m * min_size:
        raise ValueError(f"partition spec key 'min_size': {m} clients x {min_size} exceeds the {labels.size} samples")
    cap = labels.size / m
    supply = np.bincount(labels, minlength=num_classes)
    for _attempt in range(max_retries):
        counts = _hetero_dirichlet_counts(supply, m, alpha, cap, rng)
        if counts is not None and counts.sum(axis=1).min() >= min_size:
            return _owners_from_counts(labels, counts, rng), None
    raise ValueError(f"partition spec key 'max_retries': hetero_dirichlet with alpha={alpha}, {m} clients and "
                     f"min_size={min_size} found no split after {max_retries} attempts (seed {seed}); raise "
                     f"max_retries or alpha, or lower min_size")


def _hetero_dirichlet_counts(supply, m, alpha, cap, rng) -> np.ndarray | None:
    """One attempt's counts[i, c] (None when the renormalisation is 0/0)."""
    counts = np.zeros((m, supply.size), dtype=np.int64)
    sizes = np.zeros(m, dtype=np.int64)
    for c, n_c in enumerate(supply):
        shares = rng.dirichlet(np.full(m, float(alpha))) * (sizes < cap)
        total = shares.sum()
        if total == 0:
            return None
        cuts = (np.cumsum(shares / total) * n_c).astype(np.int64)[:-1]
        counts[:, c] = np.diff(np.concatenate([[0], cuts, [n_c]]))
        sizes += counts[:, c]
    return counts


@SPLITS.add("natural")
def _natural(labels, rng, *, groups, num_clients, **_):
    """One client per natural group id (a Shakespeare role); with num_clients, only the groups with most samples."""
    if groups is None:
        raise ValueError("partition scheme 'natural' needs per-sample group ids (the dataset's train_groups)")
    groups = np.asarray(groups, dtype=np.int64)
    if groups.shape != labels.shape:
        raise ValueError(f"groups has shape {groups.shape}, labels {labels.shape}")
    group_ids, sample_group = np.unique(groups[groups >= 0], return_inverse=True)
    if group_ids.size == 0:
        raise ValueError("partition scheme 'natural': no sample has a group id >= 0")
    counts = np.bincount(sample_group, minlength=group_ids.size)
    if num_clients is not None and num_clients > group_ids.size:
        raise ValueError(f"partition spec key 'num_clients': {num_clients} > the {group_ids.size} natural groups")
    keep = group_ids.size if num_clients is None else num_clients
    # The largest groups, then renumbered in group-id order so client order follows the dataset's group order.
    kept = np.sort(np.argsort(-counts, kind="stable")[:keep])
    client_of_group = np.full(group_ids.size, -1, dtype=np.int64)
    client_of_group[kept] = np.arange(keep)
    owner = np.full(labels.size, -1, dtype=np.int64)
    owner[groups >= 0] = client_of_group[sample_group]
    return owner, None


def save_partition(path: str | os.PathLike, part: Partition) -> None:
    arrays = {"offsets": part.offsets, "indices": part.indices, "label_hist": part.label_hist,
              "params": np.array(json.dumps(part.params, sort_keys=True))}
    write_npz(path, arrays if part.nu is None else {**arrays, "nu": part.nu})


def load_partition(path: str | os.PathLike) -> Partition:
    with reading(path, "partition"), np.load(path, allow_pickle=False) as data:
        nu = data["nu"].astype(np.float64) if "nu" in data.files else None
        return Partition(data["offsets"].astype(np.int64), data["indices"].astype(np.int64),
                         data["label_hist"].astype(np.int64), nu, json.loads(str(data["params"])))


def _entropy_nats(hist: np.ndarray) -> np.ndarray:
    totals = hist.sum(axis=1, keepdims=True)
    share = hist / np.where(totals > 0, totals, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(share > 0, share * np.log(share), 0.0).sum(axis=1)


def partition_stats(part: Partition) -> "pd.DataFrame":
    """Per client: size, number of classes held, label entropy (nats), dominant class and its share."""
    import pandas as pd  # here, not at the top: trace jobs load partitions and need no pandas

    hist = part.label_hist
    sizes = part.sizes
    dominant = hist.argmax(axis=1)
    stats = pd.DataFrame({"client": np.arange(part.num_clients), "size": sizes, "num_classes": (hist > 0).sum(axis=1),
                          "label_entropy": _entropy_nats(hist), "dominant_class": dominant,
                          "dominant_share": hist[np.arange(part.num_clients), dominant] / np.maximum(sizes, 1)})
    if part.nu is not None:
        stats["nu_entropy"] = _entropy_nats(part.nu)
    return stats


def plot_partition(part: Partition, path: str | os.PathLike, max_clients: int = 100) -> None:
    """Bubble chart like FedSWE Fig. 14: x = class, y = client, circle area = the class's share of the client."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = min(part.num_clients, max_clients)
    hist = part.label_hist[:shown]
    share = hist / np.maximum(hist.sum(axis=1, keepdims=True), 1)
    client, klass = np.nonzero(share)
    width = min(max(4.0, 0.35 * part.num_classes + 1.5), 30.0)
    height = min(max(3.0, 0.16 * shown + 1.0), 18.0)
    fig, ax = plt.subplots(figsize=(width, height))
    # Marker area in points^2 with the biggest possible bubble (share 1) about one row tall.
    row_points = 72 * (height - 1.0) / max(shown, 1)
    ax.scatter(klass, client, s=share[client, klass] * (0.95 * row_points) ** 2, alpha=0.7, color="tab:blue", lw=0)
    ax.set(xlim=(-0.7, part.num_classes - 0.3), ylim=(shown - 0.5, -0.5), xlabel="class", ylabel="client",
           yticks=np.arange(0, shown, max(1, shown // 20)),
           xticks=np.arange(0, part.num_classes, max(1, part.num_classes // 20)))
    title = f"{part.params.get('scheme')} α={part.params.get('alpha', '-')}, {part.num_clients} clients"
    ax.set_title(title if shown == part.num_clients else f"{title} (first {shown} shown)", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    suffix = Path(path).suffix.lstrip(".") or "png"
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=suffix, dpi=120)
    plt.close(fig)
