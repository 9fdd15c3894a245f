"""Algorithms on quadratic clients F_i(x) = ½‖x − u_i‖², where answers are known in closed form.

`simulate` drives an algorithm through its hooks in the order the trainer calls them (`run_round`), with exact local
gradient steps in place of the neural-network engine."""

import math
from collections.abc import Callable

import torch

from fedavail.algorithms.base import Algorithm, RoundContext, State, local_work
from fedavail.engine.local import LocalCorrection, LocalResult
from fedavail.engine.optim import LocalOptimizer


def run_round(algorithm: Algorithm, state: State, ctx: RoundContext,
              local_train: Callable[[torch.Tensor, torch.Tensor, LocalCorrection | None, RoundContext], LocalResult],
              ) -> tuple[State, torch.Tensor, LocalResult]:
    """One round in the trainer's order (fedavail.train._train_round): the algorithm's local_work, then
    `local_train(clients, starts, correction, ctx)` (an exact solver here, the engine in training), then its
    aggregate."""
    clients, starts, correction = local_work(algorithm, state, ctx)
    result = local_train(clients, starts, correction, ctx)
    return algorithm.aggregate(state, clients, result, ctx), clients, result


def quadratic_local_train(targets: torch.Tensor, steps: int, accuracy=None):
    """Exact local gradient descent on ½‖x − u_i‖² (with the algorithm's gradient correction)."""
    return curved_local_train(torch.ones_like(targets), targets, steps, accuracy=accuracy)


def curved_local_train(curvatures: torch.Tensor, targets: torch.Tensor, steps: int, optimizer: LocalOptimizer | None = None,
                       optimizer_rows: dict[str, torch.Tensor] | None = None, accuracy=None):
    """Exact local steps on F_i(x) = ½ Σ_k a_ik (x_k − u_ik)² with the algorithm's gradient correction, taken by the
    engine's optimizer formula (plain SGD when `optimizer` is None). `optimizer_rows` ([m, ...] tables, updated in
    place) keep each client's optimizer state across rounds; without them it starts fresh every round."""

    def local_train(clients, starts, correction: LocalCorrection | None, ctx: RoundContext) -> LocalResult:
        weights = starts.clone()
        gradient_sum = torch.zeros_like(weights)
        if optimizer is None:
            rows = {}
        elif optimizer_rows is None:
            rows = optimizer.init_rows(len(clients), weights.shape[1], weights.dtype, weights.device)
        else:
            rows = {k: v[clients] for k, v in optimizer_rows.items()}
        for _ in range(steps):
            gradient = curvatures[clients] * (weights - targets[clients])
            gradient_sum += gradient
            if correction is not None:
                gradient = correction.apply(gradient, weights)
            if optimizer is None:
                weights = weights - ctx.lr * gradient
            else:
                optimizer.step_(weights, gradient, rows, ctx.lr)
        if optimizer_rows is not None:
            for key, value in rows.items():
                optimizer_rows[key].index_copy_(0, clients, value)
        loss = 0.5 * (curvatures[clients] * (weights - targets[clients]) ** 2).sum(-1)
        acc = torch.zeros(len(clients), dtype=torch.float64) if accuracy is None else accuracy(ctx.round, clients)
        return LocalResult(starts, weights, loss.double(), acc, torch.full((len(clients),), steps), acc,
                           gradient_sum / steps)

    return local_train


def simulate(algorithm: Algorithm, targets: torch.Tensor, available: torch.Tensor, steps: int, lr,
             x0: torch.Tensor | None = None, prob: torch.Tensor | None = None, snapshot: torch.Tensor | None = None,
             seed: int = 0, accuracy=None, client_sizes: torch.Tensor | None = None):
    """Run len(available) rounds; `lr` is a float or a function of the round. Returns (final state, per-round log).

    available: bool [T, m]; prob: [T, m] p_i^t; snapshot: long [T, n]; accuracy(round, clients) -> [n] for FAST."""
    from fedavail.rng import torch_generator

    m, d = targets.shape
    sizes = torch.ones(m, dtype=torch.int64) if client_sizes is None else client_sizes
    state = algorithm.init_state(torch.zeros(d, dtype=targets.dtype) if x0 is None else x0, sizes)
    local_train = quadratic_local_train(targets, steps, accuracy)
    history = []
    for t in range(len(available)):
        ctx = RoundContext(
            round=t, available=available[t], prob=None if prob is None else prob[t],
            snapshot=None if snapshot is None else snapshot[t],
            lr=lr(t) if callable(lr) else lr, generator=torch_generator(seed, "algorithm", t))
        state, clients, _ = run_round(algorithm, state, ctx, local_train)
        history.append({"round": t, "clients": clients.tolist(), "x": state["x"].clone(),
                        **algorithm.round_metrics(state), **algorithm.eval_metrics(state)})
    return state, history


def sqrt_decay(lr0: float):
    return lambda t: lr0 / math.sqrt(t / 10 + 1)
