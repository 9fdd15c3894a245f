"""Availability trace models, torch-free: one frozen dataclass per model with its settings (each default written here
only), their checks and what it draws (`draw`; fedavail.availability.traces makes, stores and plots the traces).
Shapes: T rounds, m clients, n cohort size; probabilities are float64 [T, m], availability bool [T, m]. Sources:
FedSWE (arXiv 2609.04763 §7, Appendix H.2) and FAST's cohorts (OpenReview H3AUl3pnlu §3.2)."""

from dataclasses import asdict, dataclass
from functools import partial
from typing import ClassVar

import numpy as np

from fedavail.availability.clock import device_capacity, resolve_clock
from fedavail.options import (Registry, check_fields, check_int, check_positive, check_probabilities, is_bool,
                              is_number, must, option, resolve_variant)

WHAT = "trace spec key"
# Rounds of a trace, and so of a run (training.rounds shares the cap): 5 times the longest paper run (20,000), days of
# training at seconds a round. A run keeps a metrics row per round in memory and in its checkpoints, a trace several
# arrays of rounds x clients.
MAX_ROUNDS = 100_000
BERNOULLI_DYNAMICS = ("stationary", "staircase", "sine")
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
# Memory of drawing a trace (fedavail.availability.traces.make_trace), per round and client: p_i^t and the uniform
# draws in float64, the availability, p_i^t kept in float32, the snapshot draws and their order. tracemalloc measured
# 17 to 26 bytes across the models; a trace is refused before it would need more than MAX_TRACE_BYTES.
TRACE_BYTES_PER_ENTRY = 32
MAX_TRACE_BYTES = 4 * 2**30

_PERIOD = "P: rounds of one period of the staircase or sine modulation"
_GAMMA = "γ: sine amplitude, f(t) = γ sin(2πt/P) + 1 − γ"
_LOW = "staircase: f(t) in the second half of each period"
TRACE_MODELS = Registry(f"{WHAT} 'model'")


def check_someone_available(value, per: str = "client") -> None:
    """`value`: probabilities, one or a list, not all 0 (else no round would have participants)."""
    check_probabilities(value, allow_list=True)
    if not np.any(np.asarray(value, dtype=np.float64) > 0):
        raise ValueError(f"is 0 for every {per}: no client is ever available; give some {per} a probability above 0")


def check_rounds(value) -> None:
    """Rounds of a trace or a run: an integer >= 1, at most MAX_ROUNDS."""
    check_int(value)
    if value > MAX_ROUNDS:
        raise ValueError(f"must be at most MAX_ROUNDS = {MAX_ROUNDS:,}, got {value:,}; lower it")


check_share = must("in (0, 1]", lambda value: is_number(value) and 0 < value <= 1)


@dataclass(frozen=True, kw_only=True)
class TraceModel:
    """Settings of every model; num_clients, rounds and partition are the workflow's (a trace file has exactly the
    clients and rounds given here)."""

    NEEDS_PARTITION: ClassVar[bool] = False  # whether the config must name a partition (the model reads its ν_i)
    PER_CLIENT: ClassVar[tuple] = ()  # settings given as one probability or one per client
    # The setting that tables and captions show as its dynamics (the `dynamics` attribute); None: the model's name.
    DYNAMICS_SETTING: ClassVar[str | None] = "dynamics"

    snapshot_size: int | None = option(None, "size of the pre-drawn uniform cohort of every round (FAST's snapshots); "
                                       "null: round(0.1·m), the fast model: its cohort size", check=check_int)
    num_clients: int | None = option(None, "m; null: the partition's num_clients", check=check_int)
    rounds: int | None = option(None, f"rounds T the trace covers (at least the experiments' training.rounds, at "
                                f"most {MAX_ROUNDS:,})", check=check_rounds)
    partition: str | None = option(None, "a partition under `partitions`: its clients (and, for the fedswe model, "
                                   "their class mixes ν_i)",
                                   check=must("a partition's name", lambda v: isinstance(v, str)))
    clock: dict[str, str | float | None] | None = option(
        None, "a virtual clock (its keys: \"Virtual clock\" below): every run under the trace records each round's "
        "device time; null: none")

    def __post_init__(self):
        check_fields(self, WHAT)
        # The typed clock, resolved once with the trace; the spec stores it with its defaults filled in, as every
        # other setting.
        options = None if self.clock is None else resolve_clock(self.clock)
        object.__setattr__(self, "clock_options", options)
        if options is not None:
            object.__setattr__(self, "clock", asdict(options))

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

    def stores_prob(self) -> bool:
        """Whether its traces store p_i^t."""
        return True

    @classmethod
    def record_files(cls, spec: dict) -> list[str]:
        """The device records a trace of this model reads (inputs of its jobs, by content), from its full spec."""
        clock = spec["clock"]
        return [] if clock is None or clock["capacity"] is None else [clock["capacity"]]

    def draw(self, part, num_clients: int, rounds: int, client_rng: np.random.Generator,
             round_rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None, dict]:
        """(available bool [T, m], p_i^t [T, m] or None, extra params to record) for the Partition `part` (or None);
        client_rng for the draws made once per client, round_rng for the per-round ones. A model whose runs read a
        record as they go (the recorded model's fedscale replay) puts the sessions they read in extra["sessions"]."""
        raise NotImplementedError

    def draw_capacity(self, num_clients: int, rng: np.random.Generator) -> tuple[np.ndarray, dict]:
        """The clock's device capacities [2, m] and the params to record (fedavail.availability.clock)."""
        return device_capacity(self.clock_options, num_clients, rng)


@TRACE_MODELS.add("fedswe")
@dataclass(frozen=True, kw_only=True)
class FedSWETrace(TraceModel):
    """p_i = <ν_i, φ>, φ_c ~ U(0, Φ_c); p_i^t = clip(p_i f(t), 0, 1) (FedSWE arXiv 2609.04763 §7, App. H.2)."""

    NEEDS_PARTITION = True

    dynamics: str = option("stationary", "f(t): stationary 1, staircase, sine, or two_group windows (§7.1)",
                           choices=(*BERNOULLI_DYNAMICS, "two_group"))
    phi_max: list | None = option(None, "Φ_c per class; null: 1 for the first half of the classes, 0.5 for the rest",
                                  check=partial(check_someone_available, per="class"))
    period: int = option(20, _PERIOD, check=check_int)
    gamma: float = option(0.3, _GAMMA, check=check_probabilities)
    low: float = option(0.4, _LOW, check=check_probabilities)
    window: int = option(100, "two_group: the window Pδ; clients [0, m/2) are on in its first half, the rest after",
                         check=check_int)
    inner: str = option("static", "two_group: f inside the window, 1 (static) or the staircase",
                        choices=("static", "staircase"))
    class_mix: str = option("nu", "ν_i: the partition's drawn class mix (nu, the paper) or its realised label "
                            "shares (empirical, the FedAWE code)", choices=("nu", "empirical"))

    def draw(self, part, num_clients, rounds, client_rng, round_rng):
        if part is None:
            raise ValueError("the fedswe availability model needs the partition (p_i = <ν_i, φ> uses the class mix)")
        if part.num_clients != num_clients:
            raise ValueError(f"partition has {part.num_clients} clients, trace asked for {num_clients}")
        if self.class_mix == "nu" and part.nu is None:
            raise ValueError(f"{WHAT} 'class_mix': scheme {part.params.get('scheme')!r} draws no ν_i; use 'empirical'")
        mix = part.nu if self.class_mix == "nu" else part.label_hist / np.maximum(part.sizes, 1)[:, None]
        num_classes = mix.shape[1]
        phi_max = (np.where(np.arange(num_classes) < num_classes // 2, 1.0, 0.5) if self.phi_max is None
                   else np.asarray(self.phi_max, float))
        if phi_max.shape != (num_classes,):
            raise ValueError(f"{WHAT} 'phi_max' has {phi_max.size} values for {num_classes} classes")
        phi = client_rng.uniform(0.0, 1.0, size=num_classes) * phi_max
        if self.dynamics == "two_group":
            # Clients [0, m//2) may be available in the first half of every window of Pδ rounds, the rest in the
            # second half (eqs. 31-32). Halves are [0, Pδ/2) and [Pδ/2, Pδ), equal as in Fig. 6's caption; eq. 31's
            # `≤ Pδ/2` would give the first group one extra round.
            first_half = (np.arange(rounds) % self.window) < self.window / 2
            windows = first_half[:, None] == (np.arange(num_clients) < num_clients // 2)[None, :]
            f = windows * modulation(self, self.inner, rounds)[:, None]  # static: 1
        else:
            f = modulation(self, self.dynamics, rounds)[:, None]
        prob = np.clip((mix @ phi)[None, :] * f, 0.0, 1.0)
        extra = {"phi": phi.tolist(), "phi_max": phi_max.tolist(), "partition_params": part.params}
        return round_rng.random(prob.shape) < prob, prob, extra


@TRACE_MODELS.add("fast")
@dataclass(frozen=True, kw_only=True)
class FastTrace(TraceModel):
    """A cohort of n = round(fraction·m) distinct clients per round, uniform or skewed (FAST, OpenReview
    H3AUl3pnlu §3.2)."""

    DYNAMICS_SETTING = "distribution"

    distribution: str = option(doc="uniform, or ⌊m·Z⌋ with Z ~ Beta(1, 10), Gamma(10, 0.01), Weibull(10)/1.2",
                               choices=("uniform", *SKEWED_DISTRIBUTIONS))
    fraction: float = option(0.1, "the cohort's share of the clients, in (0, 1]", check=check_share)

    def cohort_size(self, num_clients: int) -> int:
        size = max(1, int(round(self.fraction * num_clients)))
        if self.snapshot_size is not None and self.snapshot_size != size:
            raise ValueError(f"{WHAT} 'snapshot_size': the fast model's cohort is round(fraction·m) = {size}")
        return size

    def stores_prob(self) -> bool:
        return self.distribution == "uniform"  # the skewed cohorts have no per-client probability

    def draw(self, part, num_clients, rounds, client_rng, round_rng):
        size = self.cohort_size(num_clients)
        if self.distribution == "uniform":
            cohorts = uniform_cohorts(rounds, num_clients, size, round_rng)
            prob = np.full((rounds, num_clients), size / num_clients)
        else:
            cohorts, prob = skewed_cohorts(self.distribution, rounds, num_clients, size, round_rng), None
        available = np.zeros((rounds, num_clients), dtype=bool)
        np.put_along_axis(available, cohorts, True, axis=1)
        return available, prob, {}


@TRACE_MODELS.add("bernoulli")
@dataclass(frozen=True, kw_only=True)
class BernoulliTrace(TraceModel):
    """p_i^t = clip(p f(t), 0, 1), with the fedswe model's stationary, staircase or sine f."""

    PER_CLIENT = ("p",)

    p: float | list = option(doc="p, one probability or one per client", check=check_someone_available)
    dynamics: str = option("stationary", "f(t): stationary 1, staircase or sine", choices=BERNOULLI_DYNAMICS)
    period: int = option(20, _PERIOD, check=check_int)
    gamma: float = option(0.3, _GAMMA, check=check_probabilities)
    low: float = option(0.4, _LOW, check=check_probabilities)

    def draw(self, part, num_clients, rounds, client_rng, round_rng):
        prob = np.broadcast_to(per_client(self.p, "p", num_clients), (rounds, num_clients))
        if self.dynamics != "stationary":
            prob = np.clip(prob * modulation(self, self.dynamics, rounds)[:, None], 0.0, 1.0)
        return round_rng.random(prob.shape) < prob, prob, {}


@TRACE_MODELS.add("markov")
@dataclass(frozen=True, kw_only=True)
class MarkovTrace(TraceModel):
    """An on/off chain per client, started stationary; prob records the marginal p_on/(p_on + p_off)."""

    PER_CLIENT = ("p_on", "p_off")
    DYNAMICS_SETTING = None

    p_on: float | list = option(doc="P(off → on), one probability or one per client", check=check_someone_available)
    p_off: float | list = option(doc="P(on → off), one probability or one per client",
                                 check=partial(check_probabilities, allow_list=True))

    def __post_init__(self):
        super().__post_init__()
        p_on, p_off = np.asarray(self.p_on, float), np.asarray(self.p_off, float)
        if p_on.ndim and p_off.ndim and p_on.shape != p_off.shape:
            raise ValueError(f"{WHAT} 'p_off' has {p_off.size} values but 'p_on' has {p_on.size}")
        if np.any(p_on + p_off <= 0):
            raise ValueError(f"{WHAT}s 'p_on' and 'p_off' must not both be 0 (the chain would never move)")

    def draw(self, part, num_clients, rounds, client_rng, round_rng):
        """Round 0 drawn from the stationary law π = p_on/(p_on + p_off), so P(a_i^t = 1) = π_i in every round."""
        p_on, p_off = per_client(self.p_on, "p_on", num_clients), per_client(self.p_off, "p_off", num_clients)
        stationary = p_on / (p_on + p_off)
        uniforms = round_rng.random((rounds, num_clients))
        available = np.empty((rounds, num_clients), dtype=bool)
        available[0] = uniforms[0] < stationary
        for t in range(1, rounds):  # on: turns off when u < p_off; off: turns on when u < p_on
            available[t] = np.where(available[t - 1], uniforms[t] >= p_off, uniforms[t] < p_on)
        return available, np.broadcast_to(stationary, (rounds, num_clients)), {}


@TRACE_MODELS.add("cyclic")
@dataclass(frozen=True, kw_only=True)
class CyclicTrace(TraceModel):
    """K groups of consecutive clients, one group on at a time (FedSWE eq. 4)."""

    PER_CLIENT = ("p",)
    DYNAMICS_SETTING = None

    groups: int = option(doc="K, the number of groups", check=check_int)
    p: float | list = option(doc="p_i while the client's group is on", check=check_someone_available)
    active_rounds: int = option(1, "rounds each group stays on", check=check_int)

    def check_for(self, num_clients: int) -> None:
        super().check_for(num_clients)
        if self.groups > num_clients:
            raise ValueError(f"{WHAT} 'groups': {self.groups} groups for {num_clients} clients")

    def draw(self, part, num_clients, rounds, client_rng, round_rng):
        """Client i (group ⌊iK/m⌋) may be available when ⌊t/active_rounds⌋ mod K is its group (FedSWE eq. 4 for
        active_rounds = 1; IBM's cyclic participation keeps a group active for several rounds)."""
        active_group = (np.arange(rounds) // self.active_rounds) % self.groups
        windows = active_group[:, None] == (np.arange(num_clients) * self.groups // num_clients)[None, :]
        prob = windows * per_client(self.p, "p", num_clients)[None, :]
        return round_rng.random(prob.shape) < prob, prob, {}


REPLAYS = ("window", "fedscale")
# FedScale 1.0's defaults (its config_parser): --overcommitment 1.3, --filter_less 32
FEDSCALE_OVERCOMMITMENT = 1.3
FEDSCALE_MIN_CLIENT_SAMPLES = 32


@TRACE_MODELS.add("recorded")
@dataclass(frozen=True, kw_only=True)
class RecordedTrace(TraceModel):
    """A record of real devices' online sessions replayed onto the partition's clients (docs/recorded-availability.md).
    replay `window`: rounds of fixed length on the record; client i is available in round t when its record client
    (drawn per seed) is online for at least `min_online_share` of the round's window [start_s + t·round_seconds,
    start_s + (t + 1)·round_seconds). replay `fedscale`, FedScale 1.0's rules: client i plays the record's client
    i + 1 mod c (file order); who takes part is read at each round's start on the run's own virtual clock, which
    advances by each round's duration (computed in the training loop, fedavail.availability.replay), with
    over-commitment and FedScale's small-client filter. p_i^t: the client's share of available rounds of the trace
    file (fedscale: of its preview)."""

    DYNAMICS_SETTING = None

    availability: str = option(doc="the record: FedScale's client_behave_trace pickle, or a CSV or Parquet table of "
                               "online intervals client, start_s, end_s and optionally period_s (told by content); "
                               "FedScale's record repeats with each client's finish_time, a table's with its period_s")
    replay: str = option("window", "how rounds read the record: window (fixed-length rounds, the trace drawn before "
                         "training) or fedscale (FedScale 1.0's rules on each run's virtual clock; needs a `clock`)",
                         choices=REPLAYS)
    round_seconds: float = option(doc="window: the record's seconds per round; fedscale: the spacing at which the "
                                  "trace file's preview reads the record (its figure, statistics and p_i^t; training "
                                  "reads it where each run's clock stands)", check=check_positive)
    start_s: float = option(0.0, "the record's time at round 0's start, seconds",
                            check=must("a number >= 0", lambda v: is_number(v) and v >= 0))
    min_online_share: float | None = option(None, "window: the share of a round a client must be online to be "
                                            "available (null: 1, all of it); fedscale: must be null (a client is "
                                            "online at an instant)", check=check_share)
    repeat_clients: bool = option(False, "a record with fewer clients than the partition: false refuses it; true lets "
                                  "each record client play several partition clients (window: ⌊m/c⌋ or ⌈m/c⌉, "
                                  "independent draws; fedscale: FedScale's wrap-around)",
                                  check=must("true or false", is_bool))
    participants: int | None = option(None, "fedscale: K, FedScale's num_participants: ⌊overcommitment·K⌋ online "
                                      "clients are drawn each round and the K fastest still online at the end take "
                                      "part; null: every online client that finishes while online",
                                      check=check_int)
    overcommitment: float | None = option(None, f"fedscale, with participants: the share of K drawn (null: "
                                          f"{FEDSCALE_OVERCOMMITMENT}, FedScale's); window: must be null",
                                          check=must("a number >= 1", lambda v: is_number(v) and v >= 1))
    min_client_samples: int | None = option(None, f"fedscale: clients with fewer training samples never take part "
                                            f"(FedScale's filter_less; null: {FEDSCALE_MIN_CLIENT_SAMPLES}, its "
                                            f"default; 0: none left out); window: must be null",
                                            check=partial(check_int, minimum=0))

    def __post_init__(self):
        super().__post_init__()
        fedscale_only = ("participants", "overcommitment", "min_client_samples")
        if self.replay == "window":
            for key in fedscale_only:
                if getattr(self, key) is not None:
                    raise ValueError(f"{WHAT} {key!r} belongs to replay 'fedscale' (replay is 'window'); remove it")
            if self.min_online_share is None:
                object.__setattr__(self, "min_online_share", 1.0)
            return
        if self.min_online_share is not None:
            raise ValueError(f"{WHAT} 'min_online_share' belongs to replay 'window' (replay is 'fedscale', which "
                             "reads who is online at an instant); remove it")
        if self.clock is None:
            raise ValueError(f"{WHAT} 'clock': replay 'fedscale' reads the record where each run's virtual clock "
                             "stands; give the trace a clock")
        if self.overcommitment is None:
            object.__setattr__(self, "overcommitment", FEDSCALE_OVERCOMMITMENT)
        if self.min_client_samples is None:
            object.__setattr__(self, "min_client_samples", FEDSCALE_MIN_CLIENT_SAMPLES)

    @classmethod
    def record_files(cls, spec: dict) -> list[str]:
        return [spec["availability"], *super().record_files(spec)]

    def draw(self, part, num_clients, rounds, client_rng, round_rng):
        """window: record client chosen[i] plays client i, a uniform draw without repetition (client_rng); fedscale:
        FedScale's fixed mapping, the trace's `available` a preview at instants start_s + t·round_seconds. No per-round
        draw. A trace in which no client is ever available is refused, naming the settings."""
        from fedavail.availability import device_records

        record = device_records.read_online_record(self.availability)
        try:
            if self.replay == "window":
                chosen = device_records.draw_clients(len(record.clients), num_clients, client_rng, self.repeat_clients)
            else:
                chosen = device_records.fedscale_clients(record, num_clients, self.repeat_clients)
        except ValueError as error:
            raise ValueError(f"{WHAT} 'availability': {self.availability}: {error}") from None
        starts, ends = device_records.round_windows(rounds, self.round_seconds, self.start_s)
        extra = {"record_clients": [record.clients[c] for c in chosen]}
        if self.replay == "window":
            available = device_records.available_in_windows(record, chosen, starts, ends, self.min_online_share)
            if not available.any():
                raise ValueError(f"{WHAT}s 'round_seconds', 'start_s' and 'min_online_share': no client is online for "
                                 f"{self.min_online_share:g} of any round of {self.round_seconds:g} s from "
                                 f"{self.start_s:g} s in {self.availability} ({rounds} rounds): every round would be "
                                 "empty; choose rounds that fit the record's sessions")
        else:
            extra["sessions"] = sessions = device_records.client_sessions(record, chosen)
            if not len(sessions.starts):
                raise ValueError(f"{WHAT} 'availability': none of the {len(record.clients)} clients of "
                                 f"{self.availability} that FedScale's mapping gives the {num_clients} clients is ever "
                                 "online")
            clients = np.arange(num_clients)
            available = np.stack([device_records.online_at(sessions, clients, np.full(num_clients, instant))
                                  for instant in starts]) if rounds else np.zeros((0, num_clients), dtype=bool)
        prob = np.broadcast_to(available.mean(axis=0), available.shape)
        return available, prob, extra

    def draw_capacity(self, num_clients, rng):
        return device_capacity(self.clock_options, num_clients, rng, fedscale_mapping=self.replay == "fedscale")


def resolve_trace(spec: dict) -> TraceModel:
    """A trace spec (`model` and its settings) checked, as its model's dataclass; raise ValueError naming the key."""
    return resolve_variant(spec, TRACE_MODELS, "model", WHAT, "trace")


def trace_spec(model: TraceModel) -> dict:
    """A resolved model's spec, every default filled in, `model` first."""
    return {"model": next(name for name, cls in TRACE_MODELS.items() if cls is type(model)), **asdict(model)}



def per_client(value, key: str, num_clients: int) -> np.ndarray:
    """Setting `key`, given as one number or one per client, as float64 [m]."""
    values = np.asarray(value, dtype=np.float64)
    if values.ndim == 0:
        return np.full(num_clients, float(values))
    if values.shape != (num_clients,):
        raise ValueError(f"{WHAT} {key!r} has {values.size} values for {num_clients} clients")
    return values


def check_trace_for(model: TraceModel, num_clients: int) -> None:
    """The checks that need the client count m: drawing memory, snapshot size, check_for; ValueError names the key."""
    needed = (model.rounds or 0) * num_clients * TRACE_BYTES_PER_ENTRY
    if needed > MAX_TRACE_BYTES:
        raise ValueError(f"{WHAT}s 'rounds' and 'num_clients': drawing {model.rounds:,} rounds × {num_clients:,} "
                         f"clients takes about {needed / 2**30:,.1f} GiB ({TRACE_BYTES_PER_ENTRY} bytes per round and "
                         f"client), more than MAX_TRACE_BYTES = {MAX_TRACE_BYTES / 2**30:g} GiB; give fewer rounds or "
                         f"clients")
    model.cohort_size(num_clients)
    model.check_for(num_clients)


def modulation(model: TraceModel, dynamics: str, rounds: int) -> np.ndarray:
    """f(t) [T] (H.2) with the model's period P, low and gamma: stationary 1; staircase 1 in the first half of each
    period and `low` in the second (the code's r//10 mod 2 for P = 20); sine γ sin(2πt/P) + 1 − γ."""
    t = np.arange(rounds)
    if dynamics == "staircase":
        return np.where(t % model.period < model.period / 2, 1.0, model.low)
    if dynamics == "sine":
        return model.gamma * np.sin(2 * np.pi * t / model.period) + 1.0 - model.gamma
    return np.ones(rounds)


def uniform_cohorts(rounds: int, num_clients: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """int64 [T, n]: per round n distinct clients uniformly at random, sorted ascending."""
    cohorts = np.argsort(rng.random((rounds, num_clients)), axis=1)[:, :size]
    return np.sort(cohorts, axis=1).astype(np.int64)


def skewed_cohorts(distribution: str, rounds: int, num_clients: int, size: int,
                   rng: np.random.Generator) -> np.ndarray:
    """int64 [T, n]: per round the first n distinct in-range indices ⌊m·Z⌋ of an i.i.d. stream of Z (the authors'
    rejection loop: an index ≥ m or already drawn is skipped), sorted ascending. Vectorised: a chunk of rounds draws a
    block of Z per round at once; a round whose block holds fewer than n distinct valid indices redraws a larger
    block, which leaves the law unchanged because the stream is i.i.d."""
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
                raise ValueError(f"{WHAT} 'fraction': {distribution} index draws cannot fill a cohort of {size} "
                                 f"distinct clients out of {num_clients} (the distribution concentrates on too few "
                                 "indices)")
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
