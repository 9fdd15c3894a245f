from fedavail.plan.algorithms.base import AlgorithmOptions, registered


@registered
class FedVARPOptions(AlgorithmOptions):
    """FedVARP (arXiv 2207.14130): SAGA-style variance reduction over clients."""

    MEMORY_AIDED = True

    def label(self) -> str:
        return "FedVARP (memory aided)"
