"""Local optimizers as in-place steps on flat parameter rows: one formula for the loop ([d] rows) and vmap ([n, d]
rows), and per-client state as plain tensors that the trainer can keep in [m, d] tables (`optimizer_state:
persistent`).

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

    def step_(self, weights: torch.Tensor, gradient: torch.Tensor, state: dict[str, torch.Tensor], lr: float) -> None:
        """One step for a row [d] or rows [n, d], in place on `weights` and `state`: these are [n, d] tensors, so
        each pass over them costs memory bandwidth, and no temporaries are made beyond the update itself."""
        o = self.options
        if o.weight_decay:
            gradient = gradient + o.weight_decay * weights
        if o.optimizer == "sgd":
            weights.sub_(gradient, alpha=lr)
        elif o.optimizer == "momentum":
            weights.sub_(state["momentum"].mul_(o.momentum).add_(gradient), alpha=lr)
        else:
            beta1, beta2 = o.betas
            steps = state["adam_steps"].add_(1)
            exp_avg = state["exp_avg"].mul_(beta1).add_(gradient, alpha=1 - beta1)
            exp_avg_sq = state["exp_avg_sq"].mul_(beta2).addcmul_(gradient, gradient, value=1 - beta2)
            count = steps.to(weights.dtype).reshape(*weights.shape[:-1], 1)
            denominator = exp_avg_sq.sqrt().div_((1 - beta2**count).sqrt()).add_(o.eps)
            weights.sub_(exp_avg.mul(lr / (1 - beta1**count)).div_(denominator))
