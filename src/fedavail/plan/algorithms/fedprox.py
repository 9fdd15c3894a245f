from fedavail.plan.algorithms.base import AlgorithmOptions, must, option, registered


@registered
class FedProxOptions(AlgorithmOptions):
    """FedProx (arXiv 1812.06127): local steps on F_i(w) + (μ/2)‖w − x^t‖²."""

    mu: float = option(0.01, "proximal weight μ ≥ 0 of (μ/2)‖w − x^t‖² (the FedProx paper's grid: 0.001, 0.01, 0.1, "
                       "1); 0 is FedAvg over the active clients", check=must(">= 0", lambda v: v >= 0))

    def label(self) -> str:
        return "FedProx"
