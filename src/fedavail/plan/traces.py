"""Availability trace models and their settings, torch-free: one frozen dataclass per model, each default written
here only (what each model draws: fedavail.availability.traces)."""

from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np

from fedavail.plan.experiments import MAX_ROUNDS
from fedavail.plan.options import (Registry, check_choices, check_int, check_probabilities, is_number, option,
                                   resolve_variant)

WHAT = "trace spec key"
FEDSWE_DYNAMICS = ("stationary", "staircase", "sine", "two_group")
BERNOULLI_DYNAMICS = ("stationary", "staircase", "sine")
FAST_DISTRIBUTIONS = ("uniform", "beta", "gamma", "weibull")  # the skewed ones: fedavail.availability.models
# Memory of drawing a trace (fedavail.availability.traces.make_trace), per round and client: p_i^t and the uniform
# draws in float64, the availability, p_i^t kept in float32, the snapshot draws and their order. tracemalloc measured
# 17 to 26 bytes across the models; a trace is refused before it would need more than MAX_TRACE_BYTES.
TRACE_BYTES_PER_ENTRY = 32
MAX_TRACE_BYTES = 4 * 2**30

_PERIOD = "P: rounds of one period of the staircase or sine modulation"
_GAMMA = "γ: sine amplitude, f(t) = γ sin(2πt/P) + 1 − γ"
_LOW = "staircase: f(t) in the second half of each period"
# Every model by its `model` name; what each draws is registered against the same name in
# fedavail.availability.traces (DRAWERS).
TRACE_MODELS = Registry(f"{WHAT} 'model'")


@dataclass(frozen=True, kw_only=True)
class TraceModel:
    """Settings of every model; num_clients, rounds and partition are the workflow's (a trace file has exactly the
    clients and rounds given here)."""

    NEEDS_PARTITION: ClassVar[bool] = False  # whether the config must name a partition (the model reads its ν_i)
    PER_CLIENT: ClassVar[tuple] = ()  # settings given as one probability or one per client
    # The setting that tables and captions show as its dynamics (the `dynamics` attribute); None: the model's name.
    DYNAMICS_SETTING: ClassVar[str | None] = "dynamics"

    snapshot_size: int | None = option(None, "size of the pre-drawn uniform cohort of every round (FAST's snapshots); "
                                       "null: round(0.1·m), the fast model: its cohort size")
    num_clients: int | None = option(None, "m; null: the partition's num_clients")
    rounds: int | None = option(None, f"rounds T the trace covers (at least the experiments' training.rounds, at "
                                f"most {MAX_ROUNDS:,})")
    partition: str | None = option(None, "a partition under `partitions`: its clients (and, for the fedswe model, "
                                   "their class mixes ν_i)")

    def __post_init__(self):
        for key in ("snapshot_size", "num_clients", "rounds"):
            if getattr(self, key) is not None:
                check_int(getattr(self, key), key, 1, WHAT)
        if self.rounds is not None and self.rounds > MAX_ROUNDS:
            raise ValueError(f"{WHAT} 'rounds': {self.rounds:,} rounds, more than MAX_ROUNDS = {MAX_ROUNDS:,}; "
                             f"lower it")
        if self.partition is not None and not isinstance(self.partition, str):
            raise ValueError(f"{WHAT} 'partition' must name a partition, got {self.partition!r}")
        check_choices(self, WHAT)
        self.check()

    def check(self) -> None:
        """The model's own settings."""

    def check_for(self, num_clients: int) -> None:
        """The model's own settings that depend on the client count m: per-client lists of length m."""
        for key in self.PER_CLIENT:
            per_client(getattr(self, key), key, num_clients)

    def cohort_size(self, num_clients: int) -> int:
        """The size of the snapshot cohort drawn every round for m clients."""
        size = self.snapshot_size if self.snapshot_size is not None else max(1, int(round(0.1 * num_clients)))
        if size > num_clients:
            raise ValueError(f"{WHAT} 'snapshot_size': {size} > {num_clients} clients")
        return size

    def records_prob(self) -> bool:
        """Whether its traces store p_i^t."""
        return True


@TRACE_MODELS.add("fedswe")
@dataclass(frozen=True, kw_only=True)
class FedSWETrace(TraceModel):
    """p_i = <ν_i, φ>, φ_c ~ U(0, Φ_c); p_i^t = clip(p_i f(t), 0, 1) (FedSWE arXiv 2609.04763 §7, App. H.2)."""

    NEEDS_PARTITION = True

    dynamics: str = option("stationary", "f(t): stationary 1, staircase, sine, or two_group windows (§7.1)",
                           choices=FEDSWE_DYNAMICS)
    phi_max: list | None = option(None, "Φ_c per class; null: 1 for the first half of the classes, 0.5 for the rest")
    period: int = option(20, _PERIOD)
    gamma: float = option(0.3, _GAMMA)
    low: float = option(0.4, _LOW)
    window: int = option(100, "two_group: the window Pδ; clients [0, m/2) are on in its first half, the rest after")
    inner: str = option("static", "two_group: f inside the window, 1 (static) or the staircase",
                        choices=("static", "staircase"))
    class_mix: str = option("nu", "ν_i: the partition's drawn class mix (nu, the paper) or its realised label "
                            "shares (empirical, the FedAWE code)", choices=("nu", "empirical"))

    def check(self) -> None:
        check_int(self.period, "period", 1, WHAT)
        check_int(self.window, "window", 1, WHAT)
        if self.phi_max is not None:
            check_someone_available(self.phi_max, "phi_max", "class")
        check_probabilities(self.gamma, "gamma", False, WHAT)
        check_probabilities(self.low, "low", False, WHAT)


@TRACE_MODELS.add("fast")
@dataclass(frozen=True, kw_only=True)
class FastTrace(TraceModel):
    """A cohort of n = round(fraction·m) distinct clients per round, uniform or skewed (FAST, OpenReview
    H3AUl3pnlu §3.2)."""

    DYNAMICS_SETTING = "distribution"

    distribution: str = option(doc="uniform, or ⌊m·Z⌋ with Z ~ Beta(1, 10), Gamma(10, 0.01), Weibull(10)/1.2",
                               choices=FAST_DISTRIBUTIONS)
    fraction: float = option(0.1, "the cohort's share of the clients, in (0, 1]")

    def check(self) -> None:
        if not is_number(self.fraction) or not 0 < self.fraction <= 1:
            raise ValueError(f"{WHAT} 'fraction' must be in (0, 1], got {self.fraction!r}")

    def cohort_size(self, num_clients: int) -> int:
        size = max(1, int(round(self.fraction * num_clients)))
        if self.snapshot_size is not None and self.snapshot_size != size:
            raise ValueError(f"{WHAT} 'snapshot_size': the fast model's cohort is round(fraction·m) = {size}")
        return size

    def records_prob(self) -> bool:
        return self.distribution == "uniform"  # the skewed cohorts have no per-client probability


@TRACE_MODELS.add("bernoulli")
@dataclass(frozen=True, kw_only=True)
class BernoulliTrace(TraceModel):
    """p_i^t = clip(p f(t), 0, 1), with the fedswe model's stationary, staircase or sine f."""

    PER_CLIENT = ("p",)

    p: float | list = option(doc="p, one probability or one per client")
    dynamics: str = option("stationary", "f(t): stationary 1, staircase or sine", choices=BERNOULLI_DYNAMICS)
    period: int = option(20, _PERIOD)
    gamma: float = option(0.3, _GAMMA)
    low: float = option(0.4, _LOW)

    def check(self) -> None:
        check_someone_available(self.p, "p")
        check_int(self.period, "period", 1, WHAT)
        check_probabilities(self.gamma, "gamma", False, WHAT)
        check_probabilities(self.low, "low", False, WHAT)


@TRACE_MODELS.add("markov")
@dataclass(frozen=True, kw_only=True)
class MarkovTrace(TraceModel):
    """An on/off chain per client, started stationary; prob records the marginal p_on/(p_on + p_off)."""

    PER_CLIENT = ("p_on", "p_off")
    DYNAMICS_SETTING = None

    p_on: float | list = option(doc="P(off → on), one probability or one per client")
    p_off: float | list = option(doc="P(on → off), one probability or one per client")

    def check(self) -> None:
        check_someone_available(self.p_on, "p_on")
        check_probabilities(self.p_off, "p_off", True, WHAT)
        p_on, p_off = np.asarray(self.p_on, float), np.asarray(self.p_off, float)
        if p_on.ndim and p_off.ndim and p_on.shape != p_off.shape:
            raise ValueError(f"{WHAT} 'p_off' has {p_off.size} values but 'p_on' has {p_on.size}")
        if np.any(p_on + p_off <= 0):
            raise ValueError(f"{WHAT}s 'p_on' and 'p_off' must not both be 0 (the chain would never move)")


@TRACE_MODELS.add("cyclic")
@dataclass(frozen=True, kw_only=True)
class CyclicTrace(TraceModel):
    """K groups of consecutive clients, one group on at a time (FedSWE eq. 4)."""

    PER_CLIENT = ("p",)
    DYNAMICS_SETTING = None

    groups: int = option(doc="K, the number of groups")
    p: float | list = option(doc="p_i while the client's group is on")
    active_rounds: int = option(1, "rounds each group stays on")

    def check(self) -> None:
        check_int(self.groups, "groups", 1, WHAT)
        check_someone_available(self.p, "p")
        check_int(self.active_rounds, "active_rounds", 1, WHAT)

    def check_for(self, num_clients: int) -> None:
        super().check_for(num_clients)
        if self.groups > num_clients:
            raise ValueError(f"{WHAT} 'groups': {self.groups} groups for {num_clients} clients")


def check_someone_available(value, key: str, per: str = "client") -> None:
    """`value`: probabilities, one or a list, not all 0 (no client would ever be available, no round would have
    participants)."""
    check_probabilities(value, key, True, WHAT)
    if not np.any(np.asarray(value, dtype=np.float64) > 0):
        raise ValueError(f"{WHAT} {key!r} is 0 for every {per}: no client is ever available; give some {per} a "
                         f"probability above 0")


def resolve_trace(spec: dict) -> TraceModel:
    """A trace spec (`model` and its settings) checked, as its model's dataclass; raise ValueError naming the key."""
    return resolve_variant(spec, TRACE_MODELS, "model", WHAT, "trace")


def full_trace_spec(spec: dict) -> dict:
    """The spec with every default filled in, `model` first."""
    return {"model": spec["model"], **asdict(resolve_trace(spec))}


def records_prob(spec: dict) -> bool:
    return resolve_trace(spec).records_prob()


def per_client(value, key: str, num_clients: int) -> np.ndarray:
    """Setting `key`, given as one number or one per client, as float64 [m]."""
    values = np.asarray(value, dtype=np.float64)
    if values.ndim == 0:
        return np.full(num_clients, float(values))
    if values.shape != (num_clients,):
        raise ValueError(f"{WHAT} {key!r} has {values.size} values for {num_clients} clients")
    return values


def check_trace_for(spec: dict, num_clients: int) -> None:
    """What resolve_trace cannot check without the client count m: the memory of drawing it, the snapshot size and
    the model's own (check_for). Raise ValueError naming the key."""
    model = resolve_trace(spec)
    needed = (model.rounds or 0) * num_clients * TRACE_BYTES_PER_ENTRY
    if needed > MAX_TRACE_BYTES:
        raise ValueError(f"{WHAT}s 'rounds' and 'num_clients': drawing {model.rounds:,} rounds × {num_clients:,} "
                         f"clients takes about {needed / 2**30:,.1f} GiB ({TRACE_BYTES_PER_ENTRY} bytes per round and "
                         f"client), more than MAX_TRACE_BYTES = {MAX_TRACE_BYTES / 2**30:g} GiB; give fewer rounds or "
                         f"clients")
    model.cohort_size(num_clients)
    model.check_for(num_clients)
