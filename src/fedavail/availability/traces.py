"""Availability traces: for every round and client, whether the client is available, stored once per seed; all
algorithms of a seed read the same trace. A trace holds available (bool [T, m]), prob (float32 [T, m] p_i^t where the
model defines it, else None; for markov the marginal π = p_on/(p_on + p_off), not the probability given the previous
round), snapshot (int64 [T, n]: a uniform cohort pre-drawn for every round, so FAST's snapshot rounds are
deterministic on any trace) and the parameters that made it. The models and their settings: fedavail.plan.traces
(FedSWE Fig. 3's p_i^t = p·[γ sin(0.1πt) + 1 − γ] is the bernoulli model with dynamics "sine", period 20).

Random streams (seed, "trace", k): k = 0 per-client draws (φ), 1 per-round draws, 2 snapshots. So traces of one seed
share their snapshots, and FedSWE dynamics of one seed share their p_i.
"""

import json
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedavail.availability import models
from fedavail.data.partition import Partition
from fedavail.io import atomic_path, reading, write_npz
from fedavail.plan.options import Registry
from fedavail.plan.traces import check_trace_for, full_trace_spec, per_client, resolve_trace
from fedavail.rng import numpy_generator

STREAM_CLIENTS, STREAM_ROUNDS, STREAM_SNAPSHOT = 0, 1, 2


@dataclass
class Trace:
    available: np.ndarray  # bool [T, m]
    prob: np.ndarray | None  # float32 [T, m]
    snapshot: np.ndarray | None  # int64 [T, n]
    params: dict


# What each trace model (fedavail.plan.traces.TRACE_MODELS, same names) draws: a function of the trace's params
# (its full spec with snapshot_size, seed, num_clients and rounds resolved) and the Partition (or None), taking the
# settings it reads as keywords, returning (available bool [T, m], prob [T, m] or None, extra params to record).
DRAWERS = Registry("trace spec key 'model'")


def make_trace(spec: dict, num_clients: int, rounds: int, seed: int, partition: Partition | None = None) -> Trace:
    """Draw a trace of `rounds` rounds for `num_clients` clients; all randomness from (seed, "trace", stream)."""
    spec = full_trace_spec(spec)
    if num_clients < 1 or rounds < 1:
        raise ValueError(f"a trace needs num_clients >= 1 and rounds >= 1, got {num_clients} and {rounds}")
    for key, value in (("num_clients", num_clients), ("rounds", rounds)):
        if spec[key] is not None and spec[key] != value:
            raise ValueError(f"trace spec key {key!r} is {spec[key]}, but the trace was asked for {value}")
    check_trace_for(spec, num_clients)
    params = {**spec, "snapshot_size": resolve_trace(spec).cohort_size(num_clients), "seed": int(seed),
              "num_clients": int(num_clients), "rounds": int(rounds)}
    available, prob, extra = DRAWERS[spec["model"]](partition, **params)
    snapshot_rng = numpy_generator(seed, "trace", STREAM_SNAPSHOT)
    snapshot = models.uniform_cohorts(rounds, num_clients, params["snapshot_size"], snapshot_rng)
    return Trace(np.ascontiguousarray(available, dtype=bool),
                 None if prob is None else np.ascontiguousarray(prob, dtype=np.float32), snapshot, {**params, **extra})


def _round_rng(seed: int) -> np.random.Generator:
    return numpy_generator(seed, "trace", STREAM_ROUNDS)


@DRAWERS.add("fedswe")
def _fedswe(part, *, num_clients, rounds, seed, class_mix, phi_max, dynamics, period, low, gamma, window, inner, **_):
    if part is None:
        raise ValueError("the fedswe availability model needs the partition (p_i = <ν_i, φ> uses the class mix)")
    if part.num_clients != num_clients:
        raise ValueError(f"partition has {part.num_clients} clients, trace asked for {num_clients}")
    if class_mix == "nu":
        if part.nu is None:
            raise ValueError(f"trace spec key 'class_mix': scheme {part.params.get('scheme')!r} draws no ν_i; "
                             "use 'empirical'")
        mix = part.nu
    else:
        mix = part.label_hist / np.maximum(part.sizes, 1)[:, None]
    num_classes = mix.shape[1]
    phi_max = models.default_phi_max(num_classes) if phi_max is None else np.asarray(phi_max, float)
    if phi_max.shape != (num_classes,):
        raise ValueError(f"trace spec key 'phi_max' has {phi_max.size} values for {num_classes} classes")
    base, phi = models.fedswe_base_probabilities(mix, phi_max, numpy_generator(seed, "trace", STREAM_CLIENTS))
    if dynamics == "two_group":
        within = models.modulation(inner, rounds, period, low, gamma)  # static: 1
        modulation = models.two_group_windows(rounds, num_clients, window) * within[:, None]
    else:
        modulation = models.modulation(dynamics, rounds, period, low, gamma)[:, None]
    prob = np.clip(base[None, :] * modulation, 0.0, 1.0)
    extra = {"phi": phi.tolist(), "phi_max": phi_max.tolist(), "partition_params": part.params}
    return models.bernoulli_availability(prob, _round_rng(seed)), prob, extra


@DRAWERS.add("fast")
def _fast(part, *, num_clients, rounds, seed, snapshot_size, distribution, **_):
    if distribution == "uniform":
        cohorts = models.uniform_cohorts(rounds, num_clients, snapshot_size, _round_rng(seed))
        prob = np.full((rounds, num_clients), snapshot_size / num_clients)
    else:
        cohorts = models.skewed_cohorts(distribution, rounds, num_clients, snapshot_size, _round_rng(seed))
        prob = None
    return models.cohort_mask(cohorts, num_clients), prob, {}


@DRAWERS.add("bernoulli")
def _bernoulli(part, *, num_clients, rounds, seed, p, dynamics, period, low, gamma, **_):
    prob = np.broadcast_to(per_client(p, "p", num_clients), (rounds, num_clients))
    if dynamics != "stationary":
        prob = np.clip(prob * models.modulation(dynamics, rounds, period, low, gamma)[:, None], 0.0, 1.0)
    return models.bernoulli_availability(prob, _round_rng(seed)), prob, {}


@DRAWERS.add("markov")
def _markov(part, *, num_clients, rounds, seed, p_on, p_off, **_):
    p_on, p_off = per_client(p_on, "p_on", num_clients), per_client(p_off, "p_off", num_clients)
    available = models.markov_availability(p_on, p_off, rounds, _round_rng(seed))
    return available, np.broadcast_to(p_on / (p_on + p_off), (rounds, num_clients)), {}


@DRAWERS.add("cyclic")
def _cyclic(part, *, num_clients, rounds, seed, groups, p, active_rounds, **_):
    windows = models.cyclic_windows(rounds, num_clients, groups, active_rounds)
    prob = windows * per_client(p, "p", num_clients)[None, :]
    return models.bernoulli_availability(prob, _round_rng(seed)), prob, {}


def _index_dtype(num_clients: int):
    return np.uint8 if num_clients <= 1 << 8 else np.uint16 if num_clients <= 1 << 16 else np.uint32


def save_trace(path: str | os.PathLike, trace: Trace) -> None:
    """npz: availability bit-packed per round, prob float32, snapshot in the smallest unsigned int, params JSON."""
    arrays = {"available_bits": np.packbits(trace.available, axis=1, bitorder="little"),
              "shape": np.array(trace.available.shape, dtype=np.int64),
              "params": np.array(json.dumps(trace.params, sort_keys=True))}
    if trace.prob is not None:
        arrays["prob"] = trace.prob.astype(np.float32)
    if trace.snapshot is not None:
        arrays["snapshot"] = trace.snapshot.astype(_index_dtype(trace.available.shape[1]))
    write_npz(path, arrays)


def load_trace(path: str | os.PathLike) -> Trace:
    with reading(path, "availability trace"), np.load(path, allow_pickle=False) as data:
        rounds, num_clients = (int(v) for v in data["shape"])
        available = np.unpackbits(data["available_bits"], axis=1, count=num_clients, bitorder="little")
        return Trace(available.astype(bool).reshape(rounds, num_clients),
                     data["prob"] if "prob" in data.files else None,
                     data["snapshot"].astype(np.int64) if "snapshot" in data.files else None,
                     json.loads(str(data["params"])))


def plot_trace(trace: Trace, path: str | os.PathLike, clients=None, rounds: int = 50) -> None:
    """Figure like FedSWE Fig. 16: p_i^t of a few clients, their availability boxes, and the raster of all clients."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if clients is None:  # those whose mean p_i sits nearest the 10/50/90 % quantiles (Fig. 16: p_i = 0.1, 0.5, 0.9)
        order = np.argsort((trace.prob if trace.prob is not None else trace.available).mean(axis=0), kind="stable")
        clients = np.unique(order[np.round(np.linspace(0.1, 0.9, 3) * (len(order) - 1)).astype(int)])
    clients = np.asarray(clients, dtype=np.int64)
    shown, num_clients = min(rounds, trace.available.shape[0]), trace.available.shape[1]
    t = np.arange(shown)
    colors = plt.get_cmap("tab10")(np.arange(len(clients)) % 10)
    fig, (ax_prob, ax_boxes, ax_all) = plt.subplots(3, 1, figsize=(8, 7), sharex=True,
                                                    gridspec_kw={"height_ratios": [2, 1, 3]})
    if trace.prob is not None:
        for color, client in zip(colors, clients):
            ax_prob.step(t, trace.prob[:shown, client], where="mid", color=color, label=f"client {client}")
        ax_prob.set_ylim(-0.03, 1.03)
        ax_prob.legend(fontsize=8, loc="upper right")
    else:
        ax_prob.text(0.5, 0.5, "p_i^t not defined by this model", ha="center", va="center",
                     transform=ax_prob.transAxes)
    ax_prob.set_ylabel("$p_i^t$")
    for row, (color, client) in enumerate(zip(colors, clients)):
        on = np.flatnonzero(trace.available[:shown, client])
        ax_boxes.bar(on, 0.8, bottom=row - 0.4, width=0.9, color=color)
    ax_boxes.set_yticks(np.arange(len(clients)), [str(c) for c in clients])
    ax_boxes.set(ylim=(len(clients) - 0.5, -0.5), ylabel="client")
    ax_all.imshow(trace.available[:shown].T, aspect="auto", interpolation="nearest", cmap="Greys",
                  extent=(-0.5, shown - 0.5, num_clients - 0.5, -0.5))
    ax_all.set(ylabel="client (all)", xlabel="round t")
    described = {k: v for k, v in trace.params.items() if k not in ("partition_params", "phi", "phi_max", "seed")}
    title = ", ".join(f"{k}={v}" for k, v in sorted(described.items()) if v is not None)
    fig.suptitle(textwrap.fill(title, 140), fontsize=8)
    fig.tight_layout()
    suffix = Path(path).suffix.lstrip(".") or "png"
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=suffix, dpi=120)
    plt.close(fig)
