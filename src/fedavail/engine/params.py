"""A module seen as one flat parameter vector: the server and the algorithms only ever do vector arithmetic."""

import torch
from torch import nn
from torch.func import functional_call


class FlatModel:
    """A module whose parameters and gradients live in two flat buffers, `flat` and `flat_grad`.

    The module's parameters are views into `flat` (and their .grad views into `flat_grad`), so the per-client loop
    loads a start point with one copy, runs the plain module forward/backward, and steps with one vector operation.
    `__call__` instead maps any vector (or a vmap batch of vectors) onto the module for a functional forward pass."""

    def __init__(self, module: nn.Module):
        self.module = module
        self.names = [name for name, _ in module.named_parameters()]
        self.shapes = [p.shape for _, p in module.named_parameters()]
        self.sizes = [p.numel() for _, p in module.named_parameters()]
        self.dim = sum(self.sizes)
        self._alias()

    def _alias(self) -> None:
        params = list(self.module.parameters())
        self.flat = torch.cat([p.detach().reshape(-1) for p in params])
        self.flat_grad = torch.zeros_like(self.flat)
        for p, values, grads in zip(params, torch.split(self.flat, self.sizes),
                                    torch.split(self.flat_grad, self.sizes)):
            p.data = values.view(p.shape)
            # Backward accumulates in place into an existing .grad, so gradients land in flat_grad.
            p.grad = grads.view(p.shape)

    def flatten(self) -> torch.Tensor:
        """The module's current parameters as a flat vector (a copy)."""
        return self.flat.clone()

    def unflatten(self, vector: torch.Tensor) -> dict[str, torch.Tensor]:
        return {
            name: chunk.view(shape)
            for name, chunk, shape in zip(self.names, torch.split(vector, self.sizes, dim=-1), self.shapes)
        }

    def __call__(self, vector: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        return functional_call(self.module, self.unflatten(vector), (inputs,))

    def to(self, device: torch.device) -> "FlatModel":
        self.module.to(device)
        self._alias()
        return self
