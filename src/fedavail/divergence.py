"""When a training run has diverged, so that it stops and every table and figure marks it.

The rule: a run diverges at the first round where
  - a model it evaluates has a non-finite weight, or
  - its participants' mean local training loss is non-finite or exceeds EXPLOSION_FACTOR · ln(C), where ln(C) is the
    cross-entropy of a uniform guess over the C classes (what an untrained model scores).
Clipped gradients can keep weights finite while the loss explodes (FedAvg at lr 1e6 with clipping reaches a loss of
~1e19 and chance accuracy), so finiteness alone misses divergence."""

import math

import torch

EXPLOSION_FACTOR = 100.0


def loss_limit(num_classes: int) -> float:
    return EXPLOSION_FACTOR * math.log(max(num_classes, 2))


def divergence(models: dict[str, torch.Tensor], local_loss: float, participants: int, num_classes: int) -> str | None:
    """Why the run has diverged this round, or None. A round without participants has no local loss to judge."""
    for name, weights in models.items():
        if not torch.isfinite(weights).all():
            return f"model {name!r} has non-finite weights"
    if participants and not math.isfinite(local_loss):
        return f"mean local loss is {local_loss}"
    if participants and local_loss > loss_limit(num_classes):
        return (f"mean local loss {local_loss:.3g} exceeds {EXPLOSION_FACTOR:g}·ln({num_classes}) = "
                f"{loss_limit(num_classes):.3g}")
    return None
