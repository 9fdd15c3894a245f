"""MIFA (Gu et al., NeurIPS 2021; ALGORITHMS.md §7): the server remembers every client's latest update.

  i ∈ A_t:  local training from x^t with this round's LR η_t;  G_i ← (x^t − x_i^{t,s}) / η_t
  absent:   G_i keeps its stale value
  server:   x^{t+1} = x^t − η_g·η_t·(1/N) Σ_{i=1}^N G_i        (running sum Σ G_i, O(|A_t|·d) work per round)

G_i is normalised by the LR of the round it was computed in, so a stale entry is rescaled to the current η_t (paper
and official code, hmgxr128/MIFA_code `fdu.py`). The S1/S2 re-implementations store the raw Δ_i instead; the two agree
under a constant LR.

The update runs every round, also when A_t = ∅ (the memory still moves x), as in the paper and IBM/fedau `main.py`.

Never-seen clients, option `init`:
  "zero" (default; S1/S2 and `fdu_no_wait.py`): G_i = 0 until client i first participates, so early updates are
         shrunk by (#seen / N).
  "wait" (official `fdu.py`): x stays at x^0 until every client has participated at least once (their G_i are
         computed at x^0); the first update is made in the round in which the last client is first seen. Rounds
         are still counted (the LR schedule does not pause), and the run never updates if some client never shows up.

State: x [d], G [m, d], G_sum [d], seen [m] bool. G and seen are updated in place.

Full participation: every G_i is fresh, and x^{t+1} = x^t + η_g·(1/N) Σ Δ_i, FedAvg-active exactly."""

from dataclasses import dataclass

import torch

from fedavail.algorithms.base import Algorithm, RoundContext, State
from fedavail.engine.local import LocalResult

INITS = ("zero", "wait")


@dataclass
class MIFA(Algorithm):
    init: str = "zero"

    def __post_init__(self):
        if self.init not in INITS:
            raise ValueError(f"mifa init must be one of {INITS}, got {self.init!r}")

    def init_state(self, x0: torch.Tensor, client_sizes: torch.Tensor) -> State:
        m = len(client_sizes)
        return {"x": x0.clone(), "G": x0.new_zeros(m, len(x0)), "G_sum": torch.zeros_like(x0),
                "seen": torch.zeros(m, dtype=torch.bool, device=x0.device)}

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        memory, memory_sum, seen = state["G"], state["G_sum"], state["seen"]
        if len(clients):
            fresh = (result.start - result.end) / ctx.lr
            memory_sum = memory_sum + (fresh - memory[clients]).sum(0)
            memory.index_copy_(0, clients, fresh)
            seen.index_fill_(0, clients, True)
        state = {**state, "G_sum": memory_sum}
        if self.init == "wait" and not bool(seen.all()):
            return state
        num_clients = len(memory)
        return {**state, "x": state["x"] - self.global_lr * ctx.lr * memory_sum / num_clients}
