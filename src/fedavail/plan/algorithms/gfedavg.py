from dataclasses import dataclass

from fedavail.plan.algorithms.base import AlgorithmOptions
from fedavail.plan.options import option


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


OPTIONS = GFedAvgOptions
