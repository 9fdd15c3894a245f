"""Client partitions of a training set, stored as CSR: client i holds indices[offsets[i]:offsets[i+1]], sorted
ascending. Every scheme (fedavail.partitions.schemes) assigns each train sample at most once, the Dirichlet schemes
exactly once; FedSWE's availability p_i = <ν_i, φ> reads the class mix ν_i of the schemes that draw one."""

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from fedavail.io import atomic_path, reading, write_npz
from fedavail.partitions.schemes import resolve_partition
from fedavail.rng import numpy_generator

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class Partition:
    offsets: np.ndarray  # int64 [m + 1]
    indices: np.ndarray  # int64 [total]
    label_hist: np.ndarray  # int64 [m, C]
    nu: np.ndarray | None  # float64 [m, C]: the drawn class mix ν_i, where the scheme draws one
    params: dict  # the spec that made it, in full

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
    owner, nu = scheme.split(labels, numpy_generator(seed, "partition"), num_classes, params["seed"], groups)
    m = int(owner.max()) + 1 if m is None else m
    assigned = np.flatnonzero(owner >= 0)  # owner[j] = -1: sample j unassigned
    indices = assigned[np.argsort(owner[assigned], kind="stable")]  # stable: ascending sample indices per client
    offsets = np.concatenate([[0], np.cumsum(np.bincount(owner[assigned], minlength=m))]).astype(np.int64)
    label_hist = np.zeros((m, num_classes), dtype=np.int64)
    np.add.at(label_hist, (owner[assigned], labels[assigned]), 1)
    return Partition(offsets, indices.astype(np.int64), label_hist, None if nu is None else np.asarray(nu, np.float64),
                     params)


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

    hist, sizes = part.label_hist, part.sizes
    dominant = hist.argmax(axis=1)
    stats = pd.DataFrame({"client": np.arange(part.num_clients), "size": sizes, "num_classes": (hist > 0).sum(axis=1),
                          "label_entropy": _entropy_nats(hist), "dominant_class": dominant,
                          "dominant_share": hist[np.arange(part.num_clients), dominant] / np.maximum(sizes, 1)})
    if part.nu is not None:
        stats["nu_entropy"] = _entropy_nats(part.nu)
    return stats


def plot_partition(part: Partition, path: str | os.PathLike, max_clients: int = 100) -> None:
    """Bubble chart like FedSWE Fig. 14: x = class, y = client, circle area = the class's share of the client."""
    from matplotlib.figure import Figure  # no pyplot: no backend to choose, no figure to close

    shown = min(part.num_clients, max_clients)
    hist = part.label_hist[:shown]
    share = hist / np.maximum(hist.sum(axis=1, keepdims=True), 1)
    client, klass = np.nonzero(share)
    width = min(max(4.0, 0.35 * part.num_classes + 1.5), 30.0)
    height = min(max(3.0, 0.16 * shown + 1.0), 18.0)
    fig = Figure(figsize=(width, height))
    ax = fig.subplots()
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
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or "png", dpi=120)
