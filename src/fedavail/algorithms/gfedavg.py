"""Generalized FedAvg with amplification, gFedAvg (Wang & Ji, NeurIPS 2022; arXiv 2205.13648).

  every round t:  x ← x + η_g·(1/|A_t|) Σ_{A_t} Δ_i             (FedAvg-active; no update when A_t = ∅)
  at the end of rounds t with (t + 1) % P == 0, i.e. t = P−1, 2P−1, ... (after that round's FedAvg step, whether or
  not anyone participated):
                  x ← z + η·(x − z),   then z ← x                (amplify the period's progress, reset the anchor)
  z starts at x^0, so z is always the model at the start of the current period.

This is IBM/fl-arbitrary-participation `main.py` (`num_iter − last_amplify ≥ P·iters_per_round` after the round's
update, `w += (η − 1)(w − z)`) without its warm-up phase and its sampling of S clients from the available ones: here
participants = A_t. FedSWE paper setting (Appendix H): η = `amplification` = 10, P = `period` = 100.
State: x [d], z [d]."""

import torch

from fedavail.algorithms.base import Algorithm, LocalResult, RoundContext, State
from fedavail.plan.algorithms.gfedavg import GFedAvgOptions


class GFedAvg(GFedAvgOptions, Algorithm):
    def init_state(self, x0: torch.Tensor, client_sizes: torch.Tensor) -> State:
        return {"x": x0.clone(), "z": x0.clone()}

    def amplifies(self, round_index: int) -> bool:
        return (round_index + 1) % self.period == 0

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        x = state["x"]
        if len(clients):
            x = x + self.global_lr * (result.end - result.start).mean(0)
        if not self.amplifies(ctx.round):
            return {**state, "x": x}
        x = state["z"] + self.amplification * (x - state["z"])
        return {**state, "x": x, "z": x.clone()}


ALGORITHM = GFedAvg
