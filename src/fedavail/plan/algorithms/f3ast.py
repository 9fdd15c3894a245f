from fedavail.plan.algorithms.base import AlgorithmOptions, must, option, registered


@registered
class F3ASTOptions(AlgorithmOptions):
    """F3AST (arXiv 2205.06730): availability-aware selection of K clients from learned rates."""

    beta: float = option(0.001, "β in (0, 1]: step of the selection-rate estimate r (FedSWE App. H)",
                         check=must("in (0, 1]", lambda v: 0 < v <= 1))
    clients_per_round: int | None = option(None, "K ≥ 1, the selection budget; null: max(1, round(0.1·m))",
                                           check=must(">= 1 or null", lambda v: v >= 1))
    normalization: str = option("budget", "budget: the update is divided by K (the reference code); none: not",
                                choices=("budget", "none"))

    def label(self) -> str:
        return "F3AST"
