"""Evaluation of a flat model vector on a whole split, in large batches, without autograd."""

import torch
import torch.nn.functional as F

from fedavail.engine.params import FlatModel


@torch.no_grad()
def evaluate(model: FlatModel, weights: torch.Tensor, x: torch.Tensor, y: torch.Tensor, to_inputs,
             batch_size: int = 2048) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of `weights` on (x, y); `to_inputs` turns stored samples into model inputs."""
    model.module.eval()
    total_loss, total_correct = torch.zeros(2, dtype=torch.float64, device=weights.device)
    for start in range(0, len(y), batch_size):
        logits = model(weights, to_inputs(x[start:start + batch_size]))
        labels = y[start:start + batch_size]
        total_loss += F.cross_entropy(logits, labels, reduction="sum").double()
        total_correct += (logits.argmax(1) == labels).sum()
    model.module.train()
    return total_loss.item() / len(y), total_correct.item() / len(y)
