"""Local optimizers as functions of flat parameter rows: one formula for the loop ([d] rows) and vmap ([n, d] rows),
and per-client state as plain tensors that the trainer can keep in [m, d] tables (`optimizer_state: persistent`).

  sgd:       w <- w − η (g + λ w)
  momentum:  b <- μ b + (g + λ w);  w <- w − η b                        (PyTorch SGD, dampening 0, b_0 = 0)
  adam:      m <- β1 m + (1 − β1) g';  v <- β2 v + (1 − β2) g'²;  k <- k + 1   (g' = g + λ w, PyTorch Adam's L2)
             w <- w − η/(1 − β1^k) · m / (sqrt(v)/sqrt(1 − β2^k) + ε)
"""

import torch

from fedavail.plan.local import LocalOptions

STATE_KEYS = {"sgd": (), "momentum": ("momentum",), "adam": ("exp_avg", "exp_avg_sq", "adam_steps")}


class LocalOptimizer:
    def __init__(self, options: LocalOptions):
        self.options = options
        self.keys = STATE_KEYS[options.optimizer]

    def init_rows(self, rows: int, dim: int, dtype: torch.dtype, device: torch.device) -> dict[str, torch.Tensor]:
        """Fresh optimizer state for `rows` clients (all zero, as a new PyTorch optimizer)."""
        return {key: torch.zeros(rows, dtype=torch.int64, device=device) if key == "adam_steps"
                else torch.zeros(rows, dim, dtype=dtype, device=device) for key in self.keys}

    def step(self, weights: torch.Tensor, gradient: torch.Tensor, state: dict[str, torch.Tensor], lr: float,
             active: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """One step for a row [d] or rows [n, d]; `active` [n] bool keeps inactive rows (and their state) as they are
        (clients whose local work this round is already done). Returns new tensors; nothing is modified in place."""
        o = self.options
        if o.weight_decay:
            gradient = gradient + o.weight_decay * weights
        new_state = {}
        if o.optimizer == "sgd":
            update = lr * gradient
        elif o.optimizer == "momentum":
            new_state["momentum"] = o.momentum * state["momentum"] + gradient
            update = lr * new_state["momentum"]
        else:
            beta1, beta2 = o.betas
            new_state["adam_steps"] = steps = state["adam_steps"] + 1
            new_state["exp_avg"] = beta1 * state["exp_avg"] + (1 - beta1) * gradient
            new_state["exp_avg_sq"] = beta2 * state["exp_avg_sq"] + (1 - beta2) * gradient * gradient
            count = steps.to(weights.dtype).reshape(*weights.shape[:-1], 1)
            denominator = new_state["exp_avg_sq"].sqrt() / (1 - beta2**count).sqrt() + o.eps
            update = (lr / (1 - beta1**count)) * new_state["exp_avg"] / denominator
        new_weights = weights - update
        if active is not None:
            rows = active[:, None]
            new_weights = torch.where(rows, new_weights, weights)
            new_state = {k: torch.where(rows if v.dim() == 2 else active, v, state[k]) for k, v in new_state.items()}
        return new_weights, new_state
