from fedavail.plan.algorithms.base import AlgorithmOptions, registered


@registered
class FedVARPOptions(AlgorithmOptions):
    """FedVARP (arXiv 2207.14130): SAGA-style variance reduction over clients."""
