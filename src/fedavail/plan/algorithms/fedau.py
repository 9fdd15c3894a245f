from fedavail.plan.algorithms.base import AlgorithmOptions, must, option, registered


@registered
class FedAUOptions(AlgorithmOptions):
    """FedAU (arXiv 2306.03401): each update weighted by the client's estimated participation interval."""

    cutoff: int | None = option(50, "K ≥ 1: an absence this long is recorded as an interval (FedSWE App. H and the "
                                "FedAWE code); null: no cutoff (IBM/fedau's default is 10^5)",
                                check=must("a positive integer or null", lambda v: v is None or v >= 1))

    def label(self) -> str:
        return "FedAU"
