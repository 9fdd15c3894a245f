"""FedProx (Li et al., MLSys 2020; arXiv 1812.06127).

  client i ∈ S_t: s SGD steps on F_i(w) + (μ/2)‖w − x^t‖², i.e. g <- g + μ(w − x^t), from w = x^t
  server:         x <- x + η_g (1/|S_t|) Σ_{S_t} Δ_i   (FedAvg-active);  no participants -> no update.

The anchor x^t is a detached copy of the round's start points, never a view of live weights: the authors' FAST code
anchors to the live parameters, so its proximal term is identically zero (RogerRogerUSC/FAST
`shared/agent_utils.py`, `train_k_step_fedprox`)."""

import torch

from fedavail.algorithms.base import Algorithm, LocalCorrection, LocalResult, RoundContext, State
from fedavail.plan.algorithms.fedprox import FedProxOptions


class FedProx(FedProxOptions, Algorithm):
    def correction(self, state: State, clients: torch.Tensor, ctx: RoundContext) -> LocalCorrection:
        anchor = self.start_points(state, clients, ctx).detach().clone()
        return LocalCorrection(prox_mu=self.mu, anchor=anchor)

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        if len(clients) == 0:
            return state
        return {**state, "x": state["x"] + self.global_lr * (result.end - result.start).mean(0)}


ALGORITHM = FedProx
