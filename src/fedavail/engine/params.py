"""A module seen as one flat parameter vector: the server and the algorithms only ever do vector arithmetic."""

import torch
from torch import nn
from torch.func import functional_call


class FlatModel:
    """A module whose parameters and gradients are views into two flat buffers, `flat` and `flat_grad`: the loop
    loads a start point with one copy and steps with one vector operation; `__call__` maps any vector (or a vmap batch
    of vectors) onto the module for a functional forward pass.

    With `channels_last`, 4-d kernels [out, in, kh, kw] are stored in (out, kh, kw, in) order, so their views are
    channels-last: oneDNN runs the FedSWE SVHN CNN ~1.6x faster on CPU (benchmarks/peers.py). Only the layout changes:
    in float64 a round ends where the contiguous layout's does to 1e-12; in float32 convolutions round differently by
    an ulp per sum, which local SGD amplifies (up to ~2e-4 per SVHN-CNN round; tests/test_engine_device.py). Vectors of
    the two layouts are not interchangeable."""

    def __init__(self, module: nn.Module, channels_last: bool = True):
        self.module = module
        named = dict(module.named_parameters())
        self.names, self.shapes = list(named), [p.shape for p in named.values()]
        self.sizes = [shape.numel() for shape in self.shapes]
        self.dim = sum(self.sizes)
        self.channels_last = [channels_last and len(shape) == 4 for shape in self.shapes]
        self._alias()

    def _alias(self) -> None:
        params = list(self.module.parameters())
        self.flat = torch.cat([(p.detach().permute(0, 2, 3, 1) if last else p.detach()).reshape(-1)
                               for p, last in zip(params, self.channels_last)])
        self.flat_grad = torch.zeros_like(self.flat)
        views, grad_views = self.unflatten(self.flat).values(), self.unflatten(self.flat_grad).values()
        for p, values, grads in zip(params, views, grad_views):
            p.data = values
            # Backward accumulates in place into an existing .grad, so gradients land in flat_grad.
            p.grad = grads

    def flatten(self) -> torch.Tensor:
        return self.flat.clone()

    def unflatten(self, vector: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of `vector` [..., dim] as the module's parameters [..., *shape] (channels-last ones as such)."""
        tensors = {}
        for name, chunk, shape, last in zip(self.names, torch.split(vector, self.sizes, dim=-1), self.shapes,
                                            self.channels_last):
            batch = chunk.shape[:-1]
            if last:
                out, channels, height, width = shape
                tensors[name] = chunk.view(*batch, out, height, width, channels).movedim(-1, -3)
            else:
                tensors[name] = chunk.view(*batch, *shape)
        return tensors

    def __call__(self, vector: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        return functional_call(self.module, self.unflatten(vector), (inputs,))

    def to(self, device: torch.device) -> "FlatModel":
        self.module.to(device)
        self._alias()
        return self
