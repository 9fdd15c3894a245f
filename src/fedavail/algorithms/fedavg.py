"""FedAvg under availability (ALGORITHMS.md §2): average over active clients, over all clients, or with known p_i^t.

  active: U = (1/|A_t|) Σ_{A_t} Δ_i      all: U = (1/N) Σ_{A_t} Δ_i      known: U = (1/N) Σ_{A_t} Δ_i / p_i^t
  x <- x + η_g U;  no participants -> no update."""

from dataclasses import dataclass

import torch

from fedavail.algorithms.base import Algorithm, RoundContext, State
from fedavail.engine.local import LocalResult

WEIGHTINGS = ("active", "all", "known")


@dataclass
class FedAvg(Algorithm):
    weighting: str = "active"
    min_prob: float = 0.02  # floor on p_i^t for "known": 1/p blows up for rare clients (IBM/fedau uses 0.02)

    def __post_init__(self):
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"fedavg weighting must be one of {WEIGHTINGS}, got {self.weighting!r}")
        if not 0 < self.min_prob <= 1:
            raise ValueError(f"fedavg min_prob must be in (0, 1], got {self.min_prob}")

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        if len(clients) == 0:
            return state
        delta = result.end - result.start
        num_clients = len(ctx.available)
        if self.weighting == "active":
            update = delta.mean(0)
        elif self.weighting == "all":
            update = delta.sum(0) / num_clients
        else:
            if ctx.prob is None:
                raise ValueError("fedavg with weighting 'known' needs a trace that records p_i^t")
            weights = 1.0 / ctx.prob[clients].clamp_min(self.min_prob).to(delta.dtype)
            update = (weights[:, None] * delta).sum(0) / num_clients
        return {**state, "x": state["x"] + self.global_lr * update}
