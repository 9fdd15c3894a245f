from dataclasses import dataclass

from fedavail.plan.algorithms.base import AlgorithmOptions
from fedavail.plan.options import option


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


OPTIONS = FedSWEOptions
