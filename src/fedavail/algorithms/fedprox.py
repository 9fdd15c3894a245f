"""FedProx (Li et al., MLSys 2020; arXiv 1812.06127).

  client i ∈ S_t: s SGD steps on F_i(w) + (μ/2)‖w − x^t‖², i.e. g <- g + μ(w − x^t), from w = x^t
  server:         x <- x + η_g (1/|S_t|) Σ_{S_t} Δ_i   (FedAvg-active);  no participants -> no update.

The anchor x^t is a detached copy of the round's start points, never a view of live weights: the authors' FAST code
anchors to the live parameters, so its proximal term is identically zero (RogerRogerUSC/FAST
`shared/agent_utils.py`, `train_k_step_fedprox`)."""

from dataclasses import dataclass

import torch

from fedavail.algorithms.base import Algorithm, RoundContext, State, mean_delta
from fedavail.engine.local import LocalCorrection, LocalResult


@dataclass
class FedProx(Algorithm):
    mu: float = 0.01  # paper grid {0.001, 0.01, 0.1, 1}; FL-bench's default is 1.0

    def __post_init__(self):
        if self.mu < 0:
            raise ValueError(f"fedprox mu must be >= 0, got {self.mu}")

    def correction(self, state: State, clients: torch.Tensor, ctx: RoundContext) -> LocalCorrection:
        anchor = self.start_points(state, clients, ctx).detach().clone()
        return LocalCorrection(prox_mu=self.mu, anchor=anchor)

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        if len(clients) == 0:
            return state
        return {**state, "x": state["x"] + self.global_lr * mean_delta(result)}
