from fedavail.plan.algorithms.base import AlgorithmOptions, must, option, registered


@registered
class FedAvgOptions(AlgorithmOptions):
    """FedAvg under availability (arXiv 1602.05629; the baselines of arXiv 2306.03401 and 2409.17446)."""

    weighting: str = option("active", "active: mean over the available clients; all: sum / N; known: sum of Δ_i/p_i^t "
                            "over N (needs a trace that stores p_i^t)", choices=("active", "all", "known"))
    p_floor: float | None = option(0.02, "floor on p_i^t for weighting known, so a rare client's weight is at most "
                                   "1/p_floor (IBM/fedau uses 0.02); null: no floor, as the FedAWE code",
                                   check=must("in (0, 1] or null", lambda v: v is None or 0 < v <= 1))

    def needs_prob(self) -> bool:
        return self.weighting == "known"

    def label(self) -> str:
        return {"active": "FedAvg over active", "all": "FedAvg over all", "known": "FedAvg with known p_i^t"}[
            self.weighting]

    def identity(self) -> str:
        return f"fedavg_{self.weighting}"
