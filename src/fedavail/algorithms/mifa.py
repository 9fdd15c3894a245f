"""MIFA (Gu et al., NeurIPS 2021, arXiv 2106.04159): the server remembers every client's latest update.

  normalize "lr" (paper and official code, hmgxr128/MIFA_code `fdu.py`):
    i ∈ A_t:  local training from x^t with this round's LR η_t;  G_i ← (x^t − x_i^{t,s}) / η_t
    server:   x^{t+1} = x^t − η_g·η_t·(1/N) Σ_{i=1}^N G_i      (a stale entry is rescaled to the current η_t)
  normalize "raw" (the re-implementations in IBM/fedau and mingxiang12/FedAWE, the FedSWE paper's baseline):
    i ∈ A_t:  G_i ← x^t − x_i^{t,s}
    server:   x^{t+1} = x^t − η_g·(1/N) Σ_{i=1}^N G_i          (a stale entry keeps the LR it was made with)
  absent:     G_i keeps its stale value;  running sum Σ G_i, O(|A_t|·d) work per round.
The two agree under a constant LR and differ under a decaying one.

The update runs every round, also when A_t = ∅ (the memory still moves x), as in the paper and IBM/fedau `main.py`.

Never-seen clients, option `init`:
  "zero" (default; IBM/fedau, mingxiang12/FedAWE and `fdu_no_wait.py`): G_i = 0 until client i first participates.
  "wait" (official `fdu.py`): x stays at x^0 until the round in which the last client is first seen; rounds (and the
         LR schedule) run on, and the run never updates if some client never shows up.

State: x [d], G [m, d], G_sum [d], seen [m] bool. G and seen are updated in place.

Full participation: every G_i is fresh, and x^{t+1} = x^t + η_g·(1/N) Σ Δ_i, FedAvg-active exactly."""

import torch

from fedavail.algorithms.base import Algorithm, LocalResult, RoundContext, State
from fedavail.plan.algorithms.mifa import MIFAOptions


class MIFA(MIFAOptions, Algorithm):
    def init_state(self, x0: torch.Tensor, client_sizes: torch.Tensor) -> State:
        m = len(client_sizes)
        return {"x": x0.clone(), "G": x0.new_zeros(m, len(x0)), "G_sum": torch.zeros_like(x0),
                "seen": torch.zeros(m, dtype=torch.bool, device=x0.device)}

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        memory, memory_sum, seen = state["G"], state["G_sum"], state["seen"]
        scale = ctx.lr if self.normalize == "lr" else 1.0
        if len(clients):
            fresh = (result.start - result.end) / scale
            memory_sum = memory_sum + (fresh - memory.index_select(0, clients)).sum(0)
            memory.index_copy_(0, clients, fresh)
            seen.index_fill_(0, clients, True)
        state = {**state, "G_sum": memory_sum}
        if self.init == "wait" and not bool(seen.all()):
            return state
        return {**state, "x": state["x"] - self.global_lr * scale * memory_sum / len(memory)}


ALGORITHM = MIFA
