"""FedVARP (Jhunjhunwala et al., UAI 2022; arXiv 2207.14130): SAGA-style variance reduction over clients.

  i ∈ A_t: Δ_i from x^t (as FedAvg)
  server:  U = ȳ + (1/|A_t|) Σ_{A_t} (Δ_i − y_i);   x ← x + η_g·U
  memory:  ȳ ← ȳ + (1/N) Σ_{A_t} (Δ_i − y_i),  then y_i ← Δ_i for i ∈ A_t   (ȳ = (1/N) Σ_i y_i, kept incrementally)

y_i = 0 at the start (IBM/fedau and mingxiang12/FedAWE; the paper's initialisation is not fixed), so the first
rounds are FedAvg-active.
A_t = ∅: U = 0 and no memory change, as IBM/fedau `main.py`; the formula alone would give U = ȳ.

State: x [d], y [m, d], y_bar [d]. y is updated in place.

Full participation: U = ȳ + mean Δ_i − mean y_i = mean Δ_i every round (ȳ = mean y_i), i.e. FedAvg-active."""

import torch

from fedavail.algorithms.base import Algorithm, LocalResult, RoundContext, State
from fedavail.plan.algorithms.fedvarp import FedVARPOptions


class FedVARP(FedVARPOptions, Algorithm):
    def init_state(self, x0: torch.Tensor, client_sizes: torch.Tensor) -> State:
        return {"x": x0.clone(), "y": x0.new_zeros(len(client_sizes), len(x0)), "y_bar": torch.zeros_like(x0)}

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        if len(clients) == 0:
            return state
        memory = state["y"]
        delta = result.end - result.start
        correction = delta - memory.index_select(0, clients)  # Δ_i − y_i
        update = state["y_bar"] + correction.mean(0)
        y_bar = state["y_bar"] + correction.sum(0) / len(memory)
        memory.index_copy_(0, clients, delta)
        return {**state, "x": state["x"] + self.global_lr * update, "y_bar": y_bar}


ALGORITHM = FedVARP
