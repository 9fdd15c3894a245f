from dataclasses import dataclass

from fedavail.plan.algorithms.base import AlgorithmOptions


@dataclass(frozen=True, kw_only=True)
class FedVARPOptions(AlgorithmOptions):
    """FedVARP (arXiv 2207.14130): SAGA-style variance reduction over clients."""


OPTIONS = FedVARPOptions
