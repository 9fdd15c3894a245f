"""FAST: Federated Averaging with SnapshoT (OpenReview H3AUl3pnlu, Algorithms 1 and 2), and FAST+.

  for r = 0 .. R−1:
    snapshot round (schedule below): S_r = the trace's pre-drawn uniform cohort for round r (|S_r| = m)
    arbitrary round:                 S_r = the clients the trace makes available (the base's own selection)
    clients in S_r train and the server aggregates with the base algorithm ("Lines 7-10 can be replaced by any
    other FL algorithm": base = fedavg gives FAST, fedprox / scaffold give FAST+)

Schedules:
  every:     snapshot iff r % I == 0                     (logged q = 1/I)
  bernoulli: snapshot iff u_r < q                        (the authors' code; the only mode it implements)
  adaptive:  snapshot iff u_r < q_r, Algorithm 2:
             q_0 = 0, Δ = 0;  after round r:  q_{r+1} = clip(q_r + λ(acc_{r−1} − acc_r), 0, 1)
u_r is the first uniform of the round's algorithm stream (ctx.generator), read from a copy so the stream is not
consumed and select/aggregate agree.

acc_r is the participants' mean local training accuracy, read one of two ways (option `signal`):
  round_mean: each participant's mean minibatch accuracy over round r's local steps (LocalResult.accuracy);
  running:    each participant's running mean since its current epoch began, at its last step of the round
              (LocalResult.running_accuracy): the authors' metric (RogerRogerUSC/FAST `Agent.train_accuracy`).
Round 0 has acc_{−1} = 0 (Algorithm 2 starts Δ = 0, as the authors' v_prev = 0), so q_1 = 0. A round
without participants has no accuracy and leaves q_r and acc_{r−1} unchanged.

FAST+ is composition: FAST holds a base algorithm and delegates start points, correction, aggregation and the base
state to it. SCAFFOLD under FAST: only the round's participants update c_i; c keeps its 1/N update in both kinds of
round. State: the base's state plus q (next round's), last_q and last_snapshot (the round just run, for the metrics)
and last_acc, all 0-dim tensors."""

from functools import cached_property

import torch

from fedavail.algorithms import build_algorithm
from fedavail.algorithms.base import Algorithm, LocalCorrection, LocalResult, RoundContext, State
from fedavail.plan.algorithms.fast import FastOptions

_KEYS = ("q", "last_q", "last_snapshot", "last_acc")


class Fast(FastOptions, Algorithm):
    @cached_property
    def inner(self) -> Algorithm:
        return build_algorithm(self.base, self.base_hyperparameters)

    def init_state(self, x0: torch.Tensor, client_sizes: torch.Tensor) -> State:
        state = self.inner.init_state(x0, client_sizes)
        if clash := sorted(set(state) & set(_KEYS)):
            raise ValueError(f"fast: base {self.base!r} state already has key(s) {clash}")
        q = {"every": 1.0 / self.interval, "bernoulli": self.q, "adaptive": 0.0}[self.schedule]
        q0 = torch.tensor(q, dtype=torch.float64, device=x0.device)
        return {**state, "q": q0, "last_q": q0.clone(), "last_snapshot": q0.new_zeros(()), "last_acc": q0.new_zeros(())}

    def is_snapshot(self, state: State, ctx: RoundContext) -> bool:
        if self.schedule == "every":
            return ctx.round % self.interval == 0
        peek = torch.Generator(device=ctx.generator.device).set_state(ctx.generator.get_state())
        draw = torch.rand((), generator=peek, device=ctx.generator.device, dtype=torch.float64).item()
        return draw < float(state["q"])

    def select(self, state: State, ctx: RoundContext) -> torch.Tensor:
        if ctx.snapshot is None:
            raise ValueError("fast needs the trace's pre-drawn uniform snapshot cohorts (RoundContext.snapshot); "
                             "this trace has none")
        if self.is_snapshot(state, ctx):
            return torch.sort(ctx.snapshot).values  # ascending, like the available clients
        return self.inner.select(state, ctx)

    def start_points(self, state: State, clients: torch.Tensor, ctx: RoundContext) -> torch.Tensor:
        return self.inner.start_points(state, clients, ctx)

    def correction(self, state: State, clients: torch.Tensor, ctx: RoundContext) -> LocalCorrection | None:
        return self.inner.correction(state, clients, ctx)

    def aggregate(self, state: State, clients: torch.Tensor, result: LocalResult, ctx: RoundContext) -> State:
        snapshot = self.is_snapshot(state, ctx)
        new = self.inner.aggregate(state, clients, result, ctx)
        q, last_acc = state["q"], state["last_acc"]
        next_q, next_acc = q, last_acc
        if self.schedule == "adaptive" and len(clients) > 0:
            accuracy = result.running_accuracy if self.signal == "running" else result.accuracy
            next_acc = accuracy.mean().to(last_acc)
            next_q = (q + self.lam * (last_acc - next_acc)).clamp(0.0, 1.0)
        return {**new, "q": next_q, "last_q": q, "last_snapshot": torch.full_like(q, float(snapshot)),
                "last_acc": next_acc}

    def eval_models(self, state: State) -> dict[str, torch.Tensor]:
        return self.inner.eval_models(state)

    def eval_metrics(self, state: State) -> dict[str, float]:
        return self.inner.eval_metrics(state)

    def round_metrics(self, state: State) -> dict[str, float]:
        """snapshot and q of the round just run; adaptive: also q_signal, the accuracy acc_r it fed to Algorithm 2
        (the report kind fast_q plots both)."""
        metrics = {**self.inner.round_metrics(state), "snapshot": int(state["last_snapshot"]),
                   "q": float(state["last_q"])}
        if self.schedule == "adaptive":
            metrics["q_signal"] = float(state["last_acc"])
        return metrics


ALGORITHM = Fast
