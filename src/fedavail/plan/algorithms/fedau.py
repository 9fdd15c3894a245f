from dataclasses import dataclass

from fedavail.plan.algorithms.base import AlgorithmOptions
from fedavail.plan.options import option


@dataclass(frozen=True, kw_only=True)
class FedAUOptions(AlgorithmOptions):
    """FedAU (arXiv 2306.03401): each update weighted by the client's estimated participation interval."""

    cutoff: int | None = option(50, "K ≥ 1: an absence this long is recorded as an interval (FedSWE App. H and the "
                                "FedAWE code); null: no cutoff (IBM/fedau's default is 10^5)")

    def __post_init__(self):
        super().__post_init__()
        if self.cutoff is not None and self.cutoff < 1:
            raise ValueError(f"fedau cutoff must be a positive integer or null, got {self.cutoff}")


OPTIONS = FedAUOptions
