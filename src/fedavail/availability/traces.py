"""Availability traces: for every round and client, whether the client is available, stored once per seed; all
algorithms of a seed read the same trace. The models, their settings and what each draws:
fedavail.availability.trace_models.
Random streams (seed, "trace", k): k = 0 per-client draws (φ, a record's clients), 1 per-round draws, 2 snapshots, 3 the
clock's capacities; so traces of one seed share their snapshots, and FedSWE dynamics of one seed share their p_i. A
trace with a clock also stores each client's device capacity, and a FedScale replay the sessions of the record client
each client plays, which its runs read as their clocks advance (docs/recorded-availability.md)."""

import functools
import json
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedavail.availability.trace_models import check_trace_for, resolve_trace, trace_spec, uniform_cohorts
from fedavail.availability.device_records import OnlineRecord
from fedavail.io import atomic_path, reading, write_npz
from fedavail.partitions.partition import Partition
from fedavail.rng import numpy_generator

STREAM_CLIENTS, STREAM_ROUNDS, STREAM_SNAPSHOT, STREAM_CLOCK = 0, 1, 2, 3
# Params too long for a figure's title: per-class and per-client lists, the partition's own params
UNTITLED_PARAMS = ("partition_params", "phi", "phi_max", "seed", "record_clients", "capacity_clients")


@dataclass
class Trace:
    available: np.ndarray  # bool [T, m]
    prob: np.ndarray | None  # float32 [T, m] p_i^t where the model defines it; markov: the marginal p_on/(p_on + p_off)
    snapshot: np.ndarray | None  # int64 [T, n] pre-drawn uniform cohorts: FAST's snapshot rounds, the same on any trace
    params: dict  # the parameters that made it
    # float64 [2, m]: each client's ms per training sample and kbit/s, where the trace has a clock (params["clock"])
    capacity: np.ndarray | None = None
    # replay fedscale: the sessions of the record client each client plays (clients "0", …, "m-1")
    sessions: OnlineRecord | None = None


def make_trace(spec: dict, num_clients: int, rounds: int, seed: int, partition: Partition | None = None) -> Trace:
    """Draw a trace of `rounds` rounds for `num_clients` clients; all randomness from (seed, "trace", stream). The spec
    is resolved once, here."""
    model = resolve_trace(spec)
    spec = trace_spec(model)
    if num_clients < 1 or rounds < 1:
        raise ValueError(f"a trace needs num_clients >= 1 and rounds >= 1, got {num_clients} and {rounds}")
    for key, value in (("num_clients", num_clients), ("rounds", rounds)):
        if spec[key] is not None and spec[key] != value:
            raise ValueError(f"trace spec key {key!r} is {spec[key]}, but the trace was asked for {value}")
    check_trace_for(model, num_clients)
    params = {**spec, "snapshot_size": model.cohort_size(num_clients), "seed": int(seed),
              "num_clients": int(num_clients), "rounds": int(rounds)}
    rng = functools.partial(numpy_generator, seed, "trace")
    available, prob, extra = model.draw(partition, num_clients, rounds, rng(STREAM_CLIENTS), rng(STREAM_ROUNDS))
    sessions = extra.pop("sessions", None)
    snapshot = uniform_cohorts(rounds, num_clients, params["snapshot_size"], rng(STREAM_SNAPSHOT))
    capacity, clock_extra = (None, {}) if spec["clock"] is None else model.draw_capacity(num_clients, rng(STREAM_CLOCK))
    return Trace(np.ascontiguousarray(available, dtype=bool),
                 None if prob is None else np.ascontiguousarray(prob, dtype=np.float32), snapshot,
                 {**params, **extra, **clock_extra}, capacity, sessions)


def save_trace(path: str | os.PathLike, trace: Trace) -> None:
    """npz: availability bit-packed per round, prob float32, snapshot in the smallest unsigned int, params JSON."""
    arrays = {"available_bits": np.packbits(trace.available, axis=1, bitorder="little"),
              "shape": np.array(trace.available.shape, dtype=np.int64),
              "params": np.array(json.dumps(trace.params, sort_keys=True))}
    if trace.prob is not None:
        arrays["prob"] = trace.prob.astype(np.float32)
    if trace.snapshot is not None:
        arrays["snapshot"] = trace.snapshot.astype(np.min_scalar_type(trace.available.shape[1] - 1))
    if trace.capacity is not None:
        arrays["capacity"] = trace.capacity.astype(np.float64)
    if trace.sessions is not None:
        arrays.update(session_starts=trace.sessions.starts, session_ends=trace.sessions.ends,
                      session_owner=trace.sessions.owner)
        if trace.sessions.period is not None:
            arrays["session_period"] = trace.sessions.period
    write_npz(path, arrays)


def load_trace(path: str | os.PathLike) -> Trace:
    with reading(path, "availability trace"), np.load(path, allow_pickle=False) as data:
        rounds, num_clients = (int(v) for v in data["shape"])
        available = np.unpackbits(data["available_bits"], axis=1, count=num_clients, bitorder="little")
        sessions = None
        if "session_starts" in data.files:
            sessions = OnlineRecord(tuple(str(j) for j in range(num_clients)), data["session_starts"],
                                    data["session_ends"], data["session_owner"],
                                    data["session_period"] if "session_period" in data.files else None)
        return Trace(available.astype(bool).reshape(rounds, num_clients),
                     data["prob"] if "prob" in data.files else None,
                     data["snapshot"].astype(np.int64) if "snapshot" in data.files else None,
                     json.loads(str(data["params"])), data["capacity"] if "capacity" in data.files else None,
                     sessions)


def session_rounds(available: np.ndarray) -> np.ndarray:
    """int64: the length in rounds of every session, a run of consecutive available rounds of one client."""
    padded = np.zeros((available.shape[0] + 2, available.shape[1]), dtype=np.int8)
    padded[1:-1] = available
    steps = np.diff(padded, axis=0).T  # per client: +1 where a session starts, -1 one round after it ends
    starts, ends = np.nonzero(steps.ravel() == 1)[0], np.nonzero(steps.ravel() == -1)[0]
    return (ends - starts).astype(np.int64)  # row-major: each client's starts and ends alternate, in order


def _plot_statistics(trace: Trace, ax_share, ax_sessions, ax_rates) -> None:
    """What the whole trace is: the share of clients available per round, the session lengths, each client's rate."""
    available = trace.available
    ax_share.plot(available.mean(axis=1), lw=0.8)
    ax_share.set(xlabel="round t", ylabel="share available", ylim=(-0.02, 1.02))
    sessions = session_rounds(available)
    if sessions.size:
        ax_sessions.hist(sessions, bins=np.unique(np.geomspace(1, sessions.max() + 1, 30).astype(int)), color="C1")
        ax_sessions.set_xscale("log")
    ax_sessions.set(xlabel=f"session length, rounds (mean {sessions.mean() if sessions.size else 0:.1f})",
                    ylabel="sessions")
    ax_rates.hist(available.mean(axis=0), bins=np.linspace(0, 1, 21), color="C2")
    ax_rates.set(xlabel="client's share of rounds available", ylabel="clients")


def plot_trace(trace: Trace, path: str | os.PathLike, clients=None, rounds: int = 50) -> None:
    """Figure like FedSWE Fig. 16: p_i^t of a few clients, their availability boxes, and the raster of all clients."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure  # no pyplot: no backend to choose, no figure to close

    if clients is None:  # those whose mean p_i sits nearest the 10/50/90 % quantiles (Fig. 16: p_i = 0.1, 0.5, 0.9)
        order = np.argsort((trace.prob if trace.prob is not None else trace.available).mean(axis=0), kind="stable")
        clients = np.unique(order[np.round(np.linspace(0.1, 0.9, 3) * (len(order) - 1)).astype(int)])
    clients = np.asarray(clients, dtype=np.int64)
    shown, num_clients = min(rounds, trace.available.shape[0]), trace.available.shape[1]
    colors = colormaps["tab10"](np.arange(len(clients)) % 10)
    fig = Figure(figsize=(9, 9.5))
    grid = fig.add_gridspec(4, 3, height_ratios=[2, 1, 3, 2.2])
    ax_prob = fig.add_subplot(grid[0, :])
    ax_boxes, ax_all = fig.add_subplot(grid[1, :], sharex=ax_prob), fig.add_subplot(grid[2, :], sharex=ax_prob)
    _plot_statistics(trace, *(fig.add_subplot(grid[3, column]) for column in range(3)))
    for row, (color, client) in enumerate(zip(colors, clients)):
        if trace.prob is not None:
            ax_prob.step(range(shown), trace.prob[:shown, client], where="mid", color=color, label=f"client {client}")
        ax_boxes.bar(np.flatnonzero(trace.available[:shown, client]), 0.8, bottom=row - 0.4, width=0.9, color=color)
    if trace.prob is not None:
        ax_prob.set_ylim(-0.03, 1.03)
        ax_prob.legend(fontsize=8, loc="upper right")
    else:
        ax_prob.text(0.5, 0.5, "p_i^t not defined by this model", ha="center", va="center",
                     transform=ax_prob.transAxes)
    ax_prob.set_ylabel("$p_i^t$")
    ax_boxes.set_yticks(np.arange(len(clients)), [str(c) for c in clients])
    ax_boxes.set(ylim=(len(clients) - 0.5, -0.5), ylabel="client")
    ax_all.imshow(trace.available[:shown].T, aspect="auto", interpolation="nearest", cmap="Greys",
                  extent=(-0.5, shown - 0.5, num_clients - 0.5, -0.5))
    ax_all.set(ylabel="client (all)", xlabel="round t")
    described = {k: v for k, v in trace.params.items() if k not in UNTITLED_PARAMS}
    title = ", ".join(f"{k}={v}" for k, v in sorted(described.items()) if v is not None)
    fig.suptitle(textwrap.fill(title, 140), fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or "png", dpi=120)
