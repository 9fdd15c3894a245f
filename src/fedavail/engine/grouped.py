"""Per-client loss gradients of a sequential CNN for many clients at once, written out layer by layer: the clients are
the groups of one grouped convolution, linear layers are batched matrix products, activations stay channels-last, and
the backward pass is explicit. It computes what torch.func's vmap(grad) computes for the same model (float64: to
~1e-16), without torch.func's per-operator batching and autograd's tape: on the CPU, for small_cnn at batch 16, the
step's gradient costs about a fifth less (benchmarks/roofline.py), and the first layer's input gradient, which nothing
needs, is never formed. Models with other layers (dropout, LSTMs) keep vmap.

Layouts: images are [B, n·C, H, W] (client j's channels are the j-th block of C), features [n, B, F]."""

import torch
import torch.nn.functional as F
from torch import nn

from fedavail.engine.params import FlatModel

LAYERS = (nn.Conv2d, nn.ReLU, nn.MaxPool2d, nn.Flatten, nn.Linear)
aten = torch.ops.aten


def supports(model: FlatModel) -> bool:
    """A Sequential of ungrouped zero-padded convolutions, ReLUs, max-pools, one flatten and linear layers."""
    module = model.module
    return isinstance(module, nn.Sequential) and all(
        isinstance(layer, LAYERS)
        and not (isinstance(layer, nn.Conv2d) and (layer.groups != 1 or layer.padding_mode != "zeros"
                                                   or isinstance(layer.padding, str)))
        and not (isinstance(layer, nn.Flatten) and (layer.start_dim, layer.end_dim) != (1, -1))
        for layer in module)


def _images(x: torch.Tensor) -> torch.Tensor:
    """[n, B, C, H, W] -> [B, n·C, H, W], channels-last."""
    n, batch, channels = x.shape[:3]
    return x.transpose(0, 1).reshape(batch, n * channels, *x.shape[3:]).contiguous(memory_format=torch.channels_last)


def _kernel(weight: torch.Tensor) -> torch.Tensor:
    """Per-client kernels [n, O, C, kh, kw] as one grouped convolution's [n·O, C, kh, kw], channels-last."""
    return weight.reshape(-1, *weight.shape[2:]).contiguous(memory_format=torch.channels_last)


def loss_gradient(model: FlatModel, weights: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
                  sample_weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each client j: the gradient at weights[j] of Σ_b w_jb·CE(f(x_jb), y_jb) / max(Σ_b w_jb, 1), [n, d] in the
    flat layout, and its logits [n, B, K]. weights [n, d]; x [n, B, ...]; y, sample_weights [n, B]."""
    n, batch = y.shape
    params = model.unflatten(weights)
    gradient = torch.empty_like(weights)
    logits, tape = _forward(model, params, _images(x) if x.dim() == 5 else x.reshape(n, batch, -1), n, batch)
    _backward(params, model.unflatten(gradient), tape, _logits_gradient(logits, y, sample_weights), n, batch)
    return gradient, logits


def _forward(model: FlatModel, params: dict, h: torch.Tensor, n: int, batch: int) -> tuple[torch.Tensor, list]:
    """The logits [n, B, K] of every client's network on its inputs `h` (images [B, n·C, H, W] or features
    [n, B, F]), and the tape the backward pass reads: per layer (name, layer, saved tensor, extra)."""
    tape = []
    for name, layer in model.module.named_children():
        inputs = h
        if isinstance(layer, nn.Conv2d):
            kernel = _kernel(params[f"{name}.weight"])
            bias = params.get(f"{name}.bias")
            h = F.conv2d(h, kernel, None if bias is None else bias.reshape(-1), layer.stride, layer.padding,
                         layer.dilation, n)
            tape.append((name, layer, inputs, kernel))
        elif isinstance(layer, nn.ReLU):
            h = F.relu(h)
            tape.append((name, layer, h, None))
        elif isinstance(layer, nn.MaxPool2d):
            h, indices = F.max_pool2d(h, layer.kernel_size, layer.stride, layer.padding, layer.dilation,
                                      layer.ceil_mode, return_indices=True)
            tape.append((name, layer, inputs, indices))
        elif isinstance(layer, nn.Flatten):  # each client's (C, H, W) features, as nn.Flatten orders them
            _, channels, height, width = h.shape
            h = (h.permute(0, 2, 3, 1).view(batch, height, width, n, channels // n).permute(3, 0, 4, 1, 2)
                 .reshape(n, batch, -1))
            tape.append((name, layer, inputs, None))
        else:
            bias = params.get(f"{name}.bias")
            weight = params[f"{name}.weight"].transpose(1, 2)
            h = torch.bmm(h, weight) if bias is None else torch.baddbmm(bias.unsqueeze(1), h, weight)
            tape.append((name, layer, inputs, None))
    return h, tape


def _logits_gradient(logits: torch.Tensor, y: torch.Tensor, sample_weights: torch.Tensor) -> torch.Tensor:
    """d(loss_j)/d(logits_jb) = w_jb (softmax − onehot) / max(Σ_b w_jb, 1)."""
    scale = sample_weights / sample_weights.sum(-1, keepdim=True).clamp_min(1)
    g = logits.softmax(-1)
    g.scatter_add_(-1, y.unsqueeze(-1), torch.full_like(g[..., :1], -1.0))
    g.mul_(scale.unsqueeze(-1))
    return g


def _backward(params: dict, grads: dict, tape: list, g: torch.Tensor, n: int, batch: int) -> None:
    """The backward pass from the logits' gradient `g` through the tape, each layer's weight gradients written into
    `grads` (views of the flat gradient); the first layer's input gradient is never formed."""
    for position, (name, layer, saved, extra) in reversed(list(enumerate(tape))):
        first = position == 0
        if isinstance(layer, nn.Linear):
            grads[f"{name}.weight"].copy_(torch.bmm(g.transpose(1, 2), saved))
            if f"{name}.bias" in grads:
                grads[f"{name}.bias"].copy_(g.sum(1))
            g = None if first else torch.bmm(g, params[f"{name}.weight"])
        elif isinstance(layer, nn.ReLU):
            g = aten.threshold_backward(g, saved, 0)
        elif isinstance(layer, nn.Flatten):
            _, channels, height, width = saved.shape
            g = (g.view(n, batch, channels // n, height, width).permute(1, 3, 4, 0, 2)
                 .reshape(batch, height, width, channels).permute(0, 3, 1, 2))
        elif isinstance(layer, nn.MaxPool2d):
            g = aten.max_pool2d_with_indices_backward(g, saved, layer.kernel_size, layer.stride, layer.padding,
                                                      layer.dilation, layer.ceil_mode, extra)
        else:
            has_bias = f"{name}.bias" in grads
            g, kernel_grad, bias_grad = aten.convolution_backward(
                g, saved, extra, [extra.shape[0]] if has_bias else None, layer.stride, layer.padding, layer.dilation,
                False, [0, 0], n, [not first, True, has_bias])
            grads[f"{name}.weight"].copy_(kernel_grad.view(grads[f"{name}.weight"].shape))
            if has_bias:
                grads[f"{name}.bias"].copy_(bias_grad.view(n, -1))
