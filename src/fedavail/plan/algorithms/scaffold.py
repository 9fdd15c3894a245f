from fedavail.plan.algorithms.base import AlgorithmOptions, registered


@registered
class ScaffoldOptions(AlgorithmOptions):
    """SCAFFOLD (arXiv 1910.06378): control variates correct the client drift."""

    def label(self) -> str:
        return "SCAFFOLD"
