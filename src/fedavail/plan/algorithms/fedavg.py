from dataclasses import dataclass

from fedavail.plan.algorithms.base import AlgorithmOptions
from fedavail.plan.options import option


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

    def needs_prob(self) -> bool:
        return self.weighting == "known"


OPTIONS = FedAvgOptions
