from dataclasses import dataclass

from fedavail.plan.algorithms.base import AlgorithmOptions


@dataclass(frozen=True, kw_only=True)
class ScaffoldOptions(AlgorithmOptions):
    """SCAFFOLD (arXiv 1910.06378): control variates correct the client drift."""


OPTIONS = ScaffoldOptions
