"""FedSWE (arXiv 2609.04763, Algorithm 1); k = 0 is the NeurIPS 2024 FedAWE (arXiv 2409.17446).

  init:    X_i = x^0 for every client i, τ_i = −1
  round t, i ∈ A_t (participants start from their own, possibly stale, X_i):
           G_i = X_i − x_i^{t,s}                                    (s local steps from X_i)
           x_i† = X_i − η_g·(t − τ_i)·G_i                           adaptive innovation echoing (§5.1)
  server:  x^{t+1} = (Σ_{A_t} x_i† + k·x^t) / (|A_t| + k)           global moving average (§5.2)
  multicast (postponed, §5.3): X_i ← x^{t+1}, τ_i ← t for i ∈ A_t; absent clients keep their stale X_i and τ_i.
  A_t = ∅: nothing changes (x^{t+1} = x^t by the formula; with k = 0 the formula is undefined and x is kept).

State: x [d], X [m, d] (every client's local model, stacked), tau [m] (last round active). X and tau are updated in
place (no O(md) copy per round).

`echo_clip` (default None = off; mingxiang12/FedAWE `util.accumulation` + `dataset.clip` use 0.5, FedSWE App. H's
"gradient clipping with a max norm of 0.5"): the averaged echoed update mean_{A_t}((t − τ_i)(x_i^{t,s} − X_i)) is
rescaled to L2 norm `echo_clip` when longer, before η_g; then Σ x_i† = |A_t|·(mean_{A_t} X_i + η_g·clip(...)).

Evaluation: "global" is the server model x; "local_mean" is (1/m) Σ_i X_i, the model the authors' code reports.
eval_metrics: the consensus error (1/m) Σ_i ‖X_i − X̄‖² (FedSWE Fig. 6), on evaluated rounds.

Full, always-on participation (every X_i = x^t, t − τ_i = 1): the echoed average is FedAvg-active's x^t + η_g·mean Δ_i,
so x^{t+1} = (m·x_FedAvg + k·x^t)/(m + k); with k = 0 FedSWE is FedAvg-active step for step."""

import torch

from fedavail.algorithms.base import Algorithm, LocalResult, RoundContext, State
from fedavail.plan.algorithms.fedswe import FedSWEOptions


class FedSWE(FedSWEOptions, Algorithm):
    def init_state(self, x0: torch.Tensor, client_sizes: torch.Tensor) -> State:
        m = len(client_sizes)
        return {"x": x0.clone(), "X": x0.expand(m, -1).clone(),
                "tau": torch.full((m,), -1, dtype=torch.int64, device=x0.device)}

    def start_points(self, state: State, clients: torch.Tensor, ctx: RoundContext) -> torch.Tensor:
        return state["X"].index_select(0, clients)

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        if len(clients) == 0:
            return state
        x, local, tau = state["x"], state["X"], state["tau"]
        echo = (ctx.round - tau[clients]).to(x.dtype)  # t − τ_i(t)
        innovation = result.start - result.end  # G_i
        if self.echo_clip is None:
            echoed_sum = (result.start - self.global_lr * echo[:, None] * innovation).sum(0)  # Σ x_i†
        else:
            step = -(echo[:, None] * innovation).mean(0)
            norm = step.norm()  # rescaled to L2 norm echo_clip when longer (the authors' `dataset.clip`)
            step = step * (self.echo_clip / norm) if norm > self.echo_clip else step
            echoed_sum = len(clients) * (result.start.mean(0) + self.global_lr * step)
        x_next = (echoed_sum + self.k * x) / (len(clients) + self.k)
        local.index_copy_(0, clients, x_next.expand(len(clients), -1))  # postponed multicast
        tau.index_fill_(0, clients, ctx.round)
        return {**state, "x": x_next}

    def eval_models(self, state: State) -> dict[str, torch.Tensor]:
        return {"global": state["x"], "local_mean": state["X"].mean(0)}

    def eval_metrics(self, state: State) -> dict[str, float]:
        """The consensus error (1/m) Σ_i ‖X_i − X̄‖² (one fused norm: ~5 ms for 100 × 54k on one CPU thread)."""
        local = state["X"]
        return {"consensus_error": torch.linalg.vector_norm(local - local.mean(0)).item() ** 2 / len(local)}


ALGORITHM = FedSWE
