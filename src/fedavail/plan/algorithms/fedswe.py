from fedavail.plan.algorithms.base import AlgorithmOptions, must, option, registered


@registered
class FedSWEOptions(AlgorithmOptions):
    """FedSWE (arXiv 2609.04763): adaptive innovation echoing and a global moving average; k = 0 is FedAWE (arXiv
    2409.17446)."""

    k: float = option(100.0, "interpolation coefficient k ≥ 0 of the global moving average; 0 is FedAWE",
                      check=must(">= 0", lambda v: v >= 0))
    echo_clip: float | None = option(None, "L2 clip of the averaged echoed update (the FedAWE authors' code uses 0.5); "
                                     "null: off", check=must("positive or null", lambda v: v > 0))

    def label(self) -> str:
        return f"FedSWE (k = {self.k:g})"

    def identity(self) -> str:
        return f"fedswe_k{self.k:g}"
