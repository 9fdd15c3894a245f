"""FedAU (Wang & Ji, ICLR 2024; arXiv 2306.03401): weight each update by the client's estimated participation interval.

Per client: M_i (intervals recorded), Ω_i (their mean), S_i (rounds since the last recorded interval).
  i ∈ A_t:  ω_i = Ω_i if M_i > 0 else 1     (intervals completed *before* this round; first participation: 1)
  server:   U = (1/N) Σ_{A_t} ω_i Δ_i;   x ← x + η_g·U          (divided by N, not |A_t|)
  then, every client (also when A_t = ∅):
    i ∈ A_t:  record(S_i + 1), S_i ← 0
    i ∉ A_t:  S_i ← S_i + 1; if S_i ≥ K: record(S_i), S_i ← 0     (cutoff K; every interval is ≤ K, so ω_i ≤ K)
  record(L): Ω_i ← (M_i·Ω_i + L)/(M_i + 1), M_i ← M_i + 1

For Bernoulli(p_i) availability Ω_i → 1/p_i (up to the cutoff's truncation). `cutoff` = K (FedSWE paper, arXiv
2609.04763 App. H, and mingxiang12/FedAWE: 50; null = ∞, the IBM/fedau code default 10^5).
State: x [d], M [m], Omega [m] (float64), S [m]: O(m) scalars."""

import torch

from fedavail.algorithms.base import Algorithm, LocalResult, RoundContext, State
from fedavail.plan.algorithms.fedau import FedAUOptions


class FedAU(FedAUOptions, Algorithm):
    def init_state(self, x0: torch.Tensor, client_sizes: torch.Tensor) -> State:
        counts = torch.zeros(len(client_sizes), dtype=torch.int64, device=x0.device)
        return {"x": x0.clone(), "M": counts, "Omega": counts.to(torch.float64), "S": counts.clone()}

    def weights(self, state: State, clients: torch.Tensor) -> torch.Tensor:
        """ω_i for `clients`, from the intervals recorded before this round."""
        recorded, mean = state["M"][clients], state["Omega"][clients]
        return torch.where(recorded > 0, mean, torch.ones_like(mean))

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        x = state["x"]
        if len(clients):
            delta = result.end - result.start
            omega = self.weights(state, clients).to(delta.dtype)
            x = x + self.global_lr * (omega[:, None] * delta).sum(0) / len(ctx.available)
        recorded, mean, since = state["M"], state["Omega"], state["S"]
        participated = torch.zeros_like(recorded, dtype=torch.bool).index_fill_(0, clients, True)
        length = since + 1  # a participant closes an interval of S_i + 1; an absentee's S_i grows to S_i + 1
        record = participated if self.cutoff is None else participated | (length >= self.cutoff)
        mean = torch.where(record, (recorded * mean + length) / (recorded + 1), mean)
        recorded = recorded + record
        since = torch.where(record, 0, length)
        return {**state, "x": x, "M": recorded, "Omega": mean, "S": since}


ALGORITHM = FedAU
