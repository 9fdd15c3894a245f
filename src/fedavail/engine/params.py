"""A module seen as one flat parameter vector: the server and the algorithms only ever do vector arithmetic."""

import torch
from torch import nn
from torch.func import functional_call


class FlatModel:
    """Maps a flat vector [d] onto a module's parameters (as views) for a functional forward pass."""

    def __init__(self, module: nn.Module):
        self.module = module
        self.names = [name for name, _ in module.named_parameters()]
        self.shapes = [p.shape for _, p in module.named_parameters()]
        self.sizes = [p.numel() for _, p in module.named_parameters()]
        self.dim = sum(self.sizes)

    def flatten(self) -> torch.Tensor:
        """The module's current parameters as a detached flat vector."""
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()])

    def unflatten(self, vector: torch.Tensor) -> dict[str, torch.Tensor]:
        return {
            name: chunk.view(shape)
            for name, chunk, shape in zip(self.names, torch.split(vector, self.sizes), self.shapes)
        }

    def __call__(self, vector: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        return functional_call(self.module, self.unflatten(vector), (inputs,))

    def to(self, device: torch.device) -> "FlatModel":
        self.module.to(device)
        return self
