"""SCAFFOLD with option II control variates (Karimireddy et al., ICML 2020, arXiv 1910.06378, Alg. 1).

  state: x, c [d]; c_i [m, d], one row per client; all zero at the start
  client i ∈ S_t: y <- x; s times y <- y − η_l (g_i(y) − c_i + c)
                  c_i⁺ = c_i − c + (x − y)/(s_i·η_l)        (s_i = the steps client i took, η_l = this round's LR)
                  Δy_i = y − x,  Δc_i = c_i⁺ − c_i,  c_i <- c_i⁺
  server:         x <- x + η_g (1/|S_t|) Σ_{S_t} Δy_i
                  c <- c + (1/N) Σ_{S_t} Δc_i               (keeps c = mean_i c_i; PFLlib's |S|/N per Δc_i is |S|x
                                                             too large, TsingZ0/PFLlib `serverscaffold.py`)
Clients outside S_t keep stale c_i. No participants -> no update.

The c_i table is updated in place (rows of the participants only): a copy per round would double the largest
tensor of the state."""

import torch

from fedavail.algorithms.base import Algorithm, RoundContext, State
from fedavail.engine.local import LocalCorrection, LocalResult
from fedavail.plan.algorithms import ScaffoldOptions


class Scaffold(ScaffoldOptions, Algorithm):
    """Options and their defaults: fedavail.plan.algorithms.ScaffoldOptions."""

    def init_state(self, x0: torch.Tensor, client_sizes: torch.Tensor) -> State:
        num_clients = len(client_sizes)
        return {"x": x0.clone(), "c": torch.zeros_like(x0),
                "c_i": x0.new_zeros(num_clients, x0.numel())}

    def correction(self, state: State, clients: torch.Tensor, ctx: RoundContext) -> LocalCorrection:
        return LocalCorrection(drift=state["c"] - state["c_i"][clients])

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        if len(clients) == 0:
            return state
        c, table = state["c"], state["c_i"]
        x, y = result.start, result.end
        c_old = table[clients]
        steps = result.steps.to(x.device, x.dtype)[:, None]  # per client: epoch-based local work varies
        c_new = c_old - c + (x - y) / (steps * ctx.lr)
        table.index_copy_(0, clients, c_new)
        return {
            **state,
            "x": state["x"] + self.global_lr * (y - x).mean(0),
            "c": c + (c_new - c_old).sum(0) / table.shape[0],
            "c_i": table,
        }
