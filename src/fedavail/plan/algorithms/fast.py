from fedavail.options import check_int
from fedavail.plan.algorithms import resolve_algorithm
from fedavail.plan.algorithms.base import AlgorithmOptions, must, option, registered


@registered
class FastOptions(AlgorithmOptions):
    """FAST (OpenReview H3AUl3pnlu): uniform snapshot rounds among the arbitrary ones; a base algorithm aggregates."""

    base: str = option("fedavg", "the algorithm FAST wraps (fedprox or scaffold: FAST+)",
                       choices=("fedavg", "fedprox", "scaffold"))
    base_hyperparameters: dict = option({}, "the base algorithm's options (its global_lr goes here)")
    schedule: str = option("bernoulli", "snapshot rounds: every I-th round, with probability q, or adaptive q "
                           "(Algorithm 2)", choices=("every", "bernoulli", "adaptive"))
    interval: int = option(2, "I ≥ 1, schedule every", check=check_int)
    q: float = option(0.5, "snapshot probability in [0, 1], schedule bernoulli",
                      check=must("in [0, 1]", lambda v: 0 <= v <= 1))
    lam: float = option(1.0, "λ ≥ 0, the step of adaptive q (the paper's default; the authors' command-line default "
                        "is 0.7)", check=must(">= 0", lambda v: v >= 0))
    signal: str = option("round_mean", "adaptive q's accuracy signal: the round's mean local accuracy, or the running "
                         "mean since each client's epoch began", choices=("round_mean", "running"))

    def __post_init__(self):
        super().__post_init__()
        try:
            resolve_algorithm(self.base, dict(self.base_hyperparameters or {}))
        except ValueError as error:
            raise ValueError(f"fast base_hyperparameters: {error}") from error

    def needs_prob(self) -> bool:
        return self.base_options().needs_prob()

    def base_options(self) -> AlgorithmOptions:
        return resolve_algorithm(self.base, self.base_hyperparameters)

    def schedule_name(self) -> str:
        """The schedule as FAST's tables write it: q = 0.5, I = 2, or Ada.(λ) (λ = 1 is the paper's default)."""
        if self.schedule == "adaptive":
            return f"Ada.({'def.' if self.lam == 1 else f'{self.lam:g}'})"
        return f"I = {self.interval}" if self.schedule == "every" else f"q = {self.q:g}"

    def label(self) -> str:
        return f"FAST {self.schedule_name()}" if self.base == "fedavg" else \
            f"FAST+ ({self.base_options().label()}) {self.schedule_name()}"

    def identity(self) -> str:
        tail = (f"ada{self.lam:g}" if self.schedule == "adaptive" else
                f"I{self.interval}" if self.schedule == "every" else f"q{self.q:g}")
        return f"fast_{tail}" if self.base == "fedavg" else f"fastplus_{self.base}_{tail}"

    def composed_algorithms(self) -> tuple[str, ...]:
        return (self.base,)

    @classmethod
    def hyperparameters(cls) -> list[str]:
        # global_lr belongs to the base algorithm: set it in base_hyperparameters.
        return [name for name in super().hyperparameters() if name != "global_lr"]
