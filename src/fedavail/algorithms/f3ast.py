"""F3AST (Ribero, Vikalo, de Veciana, IEEE JSTSP 2022; arXiv 2205.06730, doi 10.1109/JSTSP.2022.3224590):
learned availability-aware selection.

  p_k = n_k / Σ n (data share);  r^0 = p (the code's `initialize_p=True`)
  select:  S_t = the min(K, |A_t|) *available* clients with the largest p_k² / (r_k^t)²
           (= ∂/∂r_k of −Σ p_k²/r_k; ties go to the lower client index)
  rates:   r^{t+1} = (1 − β)·r^t + β·1{k ∈ S_t}          (every client, every round: r tracks the selection frequency)
  server:  U = (1/K) Σ_{S_t} (p_k / r_k^{t+1}) Δ_k;   x ← x + η_g·U      (weights use the *updated* rates)
           `normalization`: budget divides by the constant K, as the reference code's `ImportanceSamplingFactory`,
           also when fewer than K take part; none drops the 1/K

Departure from the reference code (mriberodiaz/f3ast `utils/training_utils.py::update_vectors`): its
`top_k(score·availability, K)` picks unavailable clients (score 0) when |A_t| < K; here a round then has fewer than K
participants. Under either normalisation the effective step drifts by a factor K over the first ~1/β rounds, because
r^0 = p does not sum to K (docs/algorithms.md#f3ast).

Defaults: β = 0.001 (FedSWE paper, Appendix H), K = `clients_per_round` or round(0.1·m).
State: x [d], r [m], p [m] (float64): O(m) scalars."""

import torch

from fedavail.algorithms.base import Algorithm, LocalResult, RoundContext, State
from fedavail.plan.algorithms.f3ast import F3ASTOptions


class F3AST(F3ASTOptions, Algorithm):
    def budget(self, num_clients: int) -> int:
        return self.clients_per_round if self.clients_per_round is not None else max(1, round(0.1 * num_clients))

    def init_state(self, x0: torch.Tensor, client_sizes: torch.Tensor) -> State:
        share = client_sizes.to(torch.float64) / client_sizes.sum()
        return {"x": x0.clone(), "r": share.clone(), "p": share}

    def select(self, state: State, ctx: RoundContext) -> torch.Tensor:
        score = torch.where(ctx.available, (state["p"] / state["r"]) ** 2, -torch.inf)
        count = min(self.budget(len(score)), int(ctx.available.sum()))
        order = torch.sort(score, descending=True, stable=True).indices
        return order[:count].sort().values

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        selected = torch.zeros_like(state["r"]).index_fill_(0, clients, 1.0)
        rates = (1 - self.beta) * state["r"] + self.beta * selected
        x = state["x"]
        if len(clients):
            delta = result.end - result.start
            weights = (state["p"][clients] / rates[clients]).to(delta.dtype)
            update = (weights[:, None] * delta).sum(0)
            if self.normalization == "budget":
                update = update / self.budget(len(rates))
            x = x + self.global_lr * update
        return {**state, "x": x, "r": rates}


ALGORITHM = F3AST
