from fedavail.plan.algorithms.base import AlgorithmOptions, must, option, registered


@registered
class GFedAvgOptions(AlgorithmOptions):
    """Generalized FedAvg with amplification, gFedAvg (arXiv 2205.13648): a periodically amplified global step."""

    amplification: float = option(10.0, "η ≥ 1: the amplification of the periodic global step (the reference code "
                                  "asserts η ≥ 1; FedSWE App. H uses 10)", check=must(">= 1", lambda v: v >= 1))
    period: int = option(100, "P ≥ 1: rounds between amplified global steps (FedSWE App. H uses 100)",
                         check=must(">= 1", lambda v: v >= 1))

    def label(self) -> str:
        return "gFedAvg"
