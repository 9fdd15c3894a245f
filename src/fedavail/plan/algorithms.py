"""Every algorithm's options, torch-free: one frozen dataclass per algorithm, each default written here only. The
algorithm classes (fedavail.algorithms) inherit these fields, so a config is checked without building anything.

Papers: FedAvg arXiv 1602.05629; FedProx arXiv 1812.06127; SCAFFOLD arXiv 1910.06378; FAST OpenReview H3AUl3pnlu;
FedSWE arXiv 2609.04763 (k = 0: FedAWE, arXiv 2409.17446); MIFA arXiv 2106.04159; FedVARP arXiv 2207.14130;
FedAU arXiv 2306.03401; gFedAvg arXiv 2205.13648; F3AST arXiv 2205.06730."""

import typing
from dataclasses import dataclass, fields

from fedavail.plan.options import check_choices, has_type, option, type_name


@dataclass(frozen=True, kw_only=True)
class AlgorithmOptions:
    """Every algorithm's settings."""

    global_lr: float = option(1.0, "server learning rate η_g: x ← x + η_g·U")

    def __post_init__(self):
        name = type(self).__name__.removesuffix("Options").lower()
        check_choices(self, f"{name} option")
        if not self.global_lr > 0:
            raise ValueError(f"{name} global_lr must be > 0, got {self.global_lr!r}")

    @classmethod
    def hyperparameters(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.init]


@dataclass(frozen=True, kw_only=True)
class FedAvgOptions(AlgorithmOptions):
    """FedAvg under availability (arXiv 1602.05629; the baselines of arXiv 2306.03401 and 2409.17446)."""

    weighting: str = option("active", "active: mean over the available clients; all: sum / N; known: sum of Δ_i/p_i^t "
                            "over N (needs a trace that records p_i^t)", choices=("active", "all", "known"))
    p_floor: float | None = option(0.02, "floor on p_i^t for weighting known, so a rare client's weight is at most "
                                   "1/p_floor (IBM/fedau uses 0.02); null: no floor, as the FedAWE code")

    def __post_init__(self):
        super().__post_init__()
        if self.p_floor is not None and not 0 < self.p_floor <= 1:
            raise ValueError(f"fedavg p_floor must be in (0, 1] or null, got {self.p_floor!r}")


@dataclass(frozen=True, kw_only=True)
class FedProxOptions(AlgorithmOptions):
    """FedProx (arXiv 1812.06127): local steps on F_i(w) + (μ/2)‖w − x^t‖²."""

    mu: float = option(0.01, "proximal weight μ ≥ 0 of (μ/2)‖w − x^t‖² (the FedProx paper's grid: 0.001, 0.01, 0.1, "
                       "1); 0 is FedAvg over the active clients")

    def __post_init__(self):
        super().__post_init__()
        if self.mu < 0:
            raise ValueError(f"fedprox mu must be >= 0, got {self.mu}")


@dataclass(frozen=True, kw_only=True)
class ScaffoldOptions(AlgorithmOptions):
    """SCAFFOLD (arXiv 1910.06378): control variates correct the client drift."""


@dataclass(frozen=True, kw_only=True)
class FastOptions(AlgorithmOptions):
    """FAST (OpenReview H3AUl3pnlu): uniform snapshot rounds among the arbitrary ones; a base algorithm aggregates."""

    base: str = option("fedavg", "the algorithm FAST wraps (fedprox or scaffold: FAST+)",
                       choices=("fedavg", "fedprox", "scaffold"))
    base_hyperparameters: dict = option({}, "the base algorithm's options (its global_lr goes here)")
    schedule: str = option("bernoulli", "snapshot rounds: every I-th round, with probability q, or adaptive q "
                           "(Algorithm 2)", choices=("every", "bernoulli", "adaptive"))
    interval: int = option(2, "I ≥ 1, schedule every")
    q: float = option(0.5, "snapshot probability in [0, 1], schedule bernoulli")
    lam: float = option(1.0, "λ ≥ 0, the step of adaptive q (the paper's default; the authors' command-line default "
                        "is 0.7)")
    signal: str = option("round_mean", "adaptive q's accuracy signal: the round's mean local accuracy, or the running "
                         "mean since each client's epoch began", choices=("round_mean", "running"))

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.interval, bool) or not isinstance(self.interval, int) or self.interval < 1:
            raise ValueError(f"fast interval must be an integer >= 1, got {self.interval!r}")
        if not 0.0 <= self.q <= 1.0:
            raise ValueError(f"fast q must be in [0, 1], got {self.q}")
        if self.lam < 0:
            raise ValueError(f"fast lam must be >= 0, got {self.lam}")
        try:
            resolve_algorithm(self.base, dict(self.base_hyperparameters or {}))
        except ValueError as error:
            raise ValueError(f"fast base_hyperparameters: {error}") from error

    @classmethod
    def hyperparameters(cls) -> list[str]:
        # global_lr belongs to the base algorithm: set it in base_hyperparameters.
        return [name for name in super().hyperparameters() if name != "global_lr"]


@dataclass(frozen=True, kw_only=True)
class FedSWEOptions(AlgorithmOptions):
    """FedSWE (arXiv 2609.04763): adaptive innovation echoing and a global moving average; k = 0 is FedAWE (arXiv
    2409.17446)."""

    k: float = option(100.0, "interpolation coefficient k ≥ 0 of the global moving average; 0 is FedAWE")
    echo_clip: float | None = option(None, "L2 clip of the averaged echoed update (the FedAWE authors' code uses 0.5); "
                                     "null: off")

    def __post_init__(self):
        super().__post_init__()
        if self.k < 0:
            raise ValueError(f"fedswe k must be >= 0, got {self.k}")
        if self.echo_clip is not None and self.echo_clip <= 0:
            raise ValueError(f"fedswe echo_clip must be positive or null, got {self.echo_clip}")


@dataclass(frozen=True, kw_only=True)
class MIFAOptions(AlgorithmOptions):
    """MIFA (arXiv 2106.04159): the server averages every client's latest stored update."""

    init: str = option("zero", "zero: a client's stored update is 0 until it first takes part; wait: no server "
                       "update until every client has taken part once", choices=("zero", "wait"))
    normalize: str = option("lr", "lr: stored updates rescaled to the current learning rate; raw: kept as made",
                            choices=("lr", "raw"))


@dataclass(frozen=True, kw_only=True)
class FedVARPOptions(AlgorithmOptions):
    """FedVARP (arXiv 2207.14130): SAGA-style variance reduction over clients."""


@dataclass(frozen=True, kw_only=True)
class FedAUOptions(AlgorithmOptions):
    """FedAU (arXiv 2306.03401): each update weighted by the client's estimated participation interval."""

    cutoff: int | None = option(50, "K ≥ 1: an absence this long is recorded as an interval (FedSWE App. H and the "
                                "FedAWE code); null: no cutoff (IBM/fedau's default is 10^5)")

    def __post_init__(self):
        super().__post_init__()
        if self.cutoff is not None and self.cutoff < 1:
            raise ValueError(f"fedau cutoff must be a positive integer or null, got {self.cutoff}")


@dataclass(frozen=True, kw_only=True)
class GFedAvgOptions(AlgorithmOptions):
    """Generalized FedAvg with amplification, gFedAvg (arXiv 2205.13648): a periodically amplified global step."""

    amplification: float = option(10.0, "η ≥ 1: the amplification of the periodic global step (the reference code "
                                  "asserts η ≥ 1; FedSWE App. H uses 10)")
    period: int = option(100, "P ≥ 1: rounds between amplified global steps (FedSWE App. H uses 100)")

    def __post_init__(self):
        super().__post_init__()
        if self.amplification < 1:  # the reference code asserts η ≥ 1
            raise ValueError(f"gfedavg amplification must be >= 1, got {self.amplification}")
        if self.period < 1:
            raise ValueError(f"gfedavg period must be >= 1, got {self.period}")


@dataclass(frozen=True, kw_only=True)
class F3ASTOptions(AlgorithmOptions):
    """F3AST (arXiv 2205.06730): availability-aware selection of K clients from learned rates."""

    beta: float = option(0.001, "β in (0, 1]: step of the selection-rate estimate r (FedSWE App. H)")
    clients_per_round: int | None = option(None, "K ≥ 1, the selection budget; null: max(1, round(0.1·m))")
    normalization: str = option("budget", "budget: the update is divided by K (the reference code); none: not",
                                choices=("budget", "none"))

    def __post_init__(self):
        super().__post_init__()
        if not 0 < self.beta <= 1:
            raise ValueError(f"f3ast beta must be in (0, 1], got {self.beta}")
        if self.clients_per_round is not None and self.clients_per_round < 1:
            raise ValueError(f"f3ast clients_per_round must be >= 1 or null, got {self.clients_per_round}")


ALGORITHM_OPTIONS: dict[str, type[AlgorithmOptions]] = {
    "fedavg": FedAvgOptions,
    "fedprox": FedProxOptions,
    "scaffold": ScaffoldOptions,
    "fast": FastOptions,
    "fedswe": FedSWEOptions,
    "mifa": MIFAOptions,
    "fedvarp": FedVARPOptions,
    "fedau": FedAUOptions,
    "gfedavg": GFedAvgOptions,
    "f3ast": F3ASTOptions,
}


def check_hyperparameters(name: str, hyperparameters: dict) -> type[AlgorithmOptions]:
    """Raise ValueError for an unknown algorithm, an option it does not take or a value of the wrong type; return
    its options class."""
    if name not in ALGORITHM_OPTIONS:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHM_OPTIONS)}")
    cls = ALGORITHM_OPTIONS[name]
    unknown = sorted(set(hyperparameters) - set(cls.hyperparameters()))
    if unknown:
        raise ValueError(f"algorithm {name!r} has no hyperparameter(s) {unknown}; it takes {cls.hyperparameters()}")
    hints = typing.get_type_hints(cls)
    for key, value in hyperparameters.items():
        if not has_type(value, hints[key]):
            raise ValueError(f"algorithm {name!r} hyperparameter {key!r} must be {type_name(hints[key])}, "
                             f"got {value!r}")
    return cls


def resolve_algorithm(name: str, hyperparameters: dict) -> AlgorithmOptions:
    """Algorithm `name`'s options from a config entry's hyperparameters, checked, every default filled in."""
    return check_hyperparameters(name, hyperparameters)(**hyperparameters)
