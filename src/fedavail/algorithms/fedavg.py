"""FedAvg (McMahan et al., arXiv 1602.05629) under availability: average over active clients, over all clients, or
with known p_i^t (the baselines of arXiv 2306.03401 and 2409.17446).

  active: U = (1/|A_t|) Σ_{A_t} Δ_i    all: U = (1/N) Σ_{A_t} Δ_i    known: U = (1/N) Σ_{A_t} Δ_i / max(p_i^t, p_floor)
  x <- x + η_g U;  no participants -> no update.

`p_floor` bounds the weight 1/p for rare clients: 0.02 as in IBM/fedau; null applies no floor, as the FedAWE
authors' code (mingxiang12/FedAWE) that produced the FedSWE paper's numbers does."""

import torch

from fedavail.algorithms.base import Algorithm, LocalResult, RoundContext, State
from fedavail.plan.algorithms.fedavg import FedAvgOptions


class FedAvg(FedAvgOptions, Algorithm):
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
                raise ValueError("fedavg with weighting 'known' needs a trace that stores p_i^t")
            prob = ctx.prob[clients].to(delta.dtype)
            weights = 1.0 / (prob if self.p_floor is None else prob.clamp_min(self.p_floor))
            update = (weights[:, None] * delta).sum(0) / num_clients
        return {**state, "x": state["x"] + self.global_lr * update}


ALGORITHM = FedAvg
