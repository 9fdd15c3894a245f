"""SCAFFOLD with option II control variates (Karimireddy et al., ICML 2020, arXiv 1910.06378, Alg. 1), kept in
gradient units so that it holds under any local optimizer.

  state: x, c [d]; c_i [m, d], one row per client; all zero at the start
  client i ∈ S_t: y <- x; each local step: g <- g_i(y) + c − c_i, then one step of the local optimizer with g
                  c_i⁺ = (1/s_i) Σ_steps g_i(y)                (the mean raw minibatch gradient of the round)
                  Δy_i = y − x,  Δc_i = c_i⁺ − c_i,  c_i <- c_i⁺
  server:         x <- x + η_g (1/|S_t|) Σ_{S_t} Δy_i
                  c <- c + (1/N) Σ_{S_t} Δc_i               (keeps c = mean_i c_i; PFLlib's |S|/N per Δc_i is |S|x
                                                             too large, TsingZ0/PFLlib `serverscaffold.py`)
Clients outside S_t keep stale c_i. No participants -> no update.

Option II as printed, c_i⁺ = c_i − c + (x − y)/(s_i η_l), is the mean raw gradient only for plain SGD steps of size
η_l: under momentum or Adam it is in the optimizer's units and the control variates mis-scale (docs/algorithms.md),
so the engine measures the mean gradient directly (LocalCorrection.mean_gradient). The FAST authors' code has no
SCAFFOLD; FL-bench and PFLlib use option II with SGD.

The c_i table is updated in place (rows of the participants only): a copy per round would double the largest
tensor of the state."""

import torch

from fedavail.algorithms.base import Algorithm, LocalCorrection, LocalResult, RoundContext, State
from fedavail.plan.algorithms.scaffold import ScaffoldOptions


class Scaffold(ScaffoldOptions, Algorithm):
    def init_state(self, x0: torch.Tensor, client_sizes: torch.Tensor) -> State:
        return {"x": x0.clone(), "c": torch.zeros_like(x0), "c_i": x0.new_zeros(len(client_sizes), x0.numel())}

    def correction(self, state: State, clients: torch.Tensor, ctx: RoundContext) -> LocalCorrection:
        return LocalCorrection(drift=state["c"] - state["c_i"].index_select(0, clients), mean_gradient=True)

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        if len(clients) == 0:
            return state
        c, table = state["c"], state["c_i"]
        c_old = table.index_select(0, clients)
        c_new = result.mean_gradient.to(c_old)
        table.index_copy_(0, clients, c_new)
        return {**state, "x": state["x"] + self.global_lr * (result.end - result.start).mean(0),
                "c": c + (c_new - c_old).sum(0) / table.shape[0]}  # c_i: the same table, updated in place


ALGORITHM = Scaffold
