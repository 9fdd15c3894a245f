"""Local training for a round's participants: s SGD steps each, from the start points the algorithm chose.

Two interchangeable implementations behind `train_clients`: a per-client loop (the fast path on CPU) and a
torch.func.vmap over stacked client parameters (the default on CUDA). Both consume the same keyed minibatch streams,
so they return the same end points up to floating-point reassociation."""

import contextlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.func import grad, vmap

from fedavail.engine.client_data import ClientData
from fedavail.engine.params import FlatModel
from fedavail.rng import seed_sequence
from fedavail.stopping import raise_if_requested


@dataclass
class LocalCorrection:
    """A per-client linear gradient correction, g <- g + prox_mu * (w - anchor) + drift.

    FedProx: prox_mu = μ, anchor = the round's start model. SCAFFOLD: drift = c - c_i."""

    prox_mu: float = 0.0
    anchor: torch.Tensor | None = None  # [n, d]
    drift: torch.Tensor | None = None  # [n, d]

    def row(self, j: int) -> "LocalCorrection":
        return LocalCorrection(
            self.prox_mu,
            None if self.anchor is None else self.anchor[j],
            None if self.drift is None else self.drift[j],
        )

    def apply(self, gradient: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        if self.prox_mu:
            gradient = gradient + self.prox_mu * (weights - self.anchor)
        if self.drift is not None:
            gradient = gradient + self.drift
        return gradient


@dataclass
class LocalSpec:
    steps: int
    batch_size: int
    lr: float
    grad_clip: float | None  # max L2 norm of each stochastic gradient; None disables


@dataclass
class LocalResult:
    start: torch.Tensor  # [n, d]
    end: torch.Tensor  # [n, d]
    loss: torch.Tensor  # [n] mean minibatch loss over the local steps
    accuracy: torch.Tensor  # [n] mean minibatch accuracy over the local steps


def _clip(gradient: torch.Tensor, max_norm: float | None) -> torch.Tensor:
    # Matches torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when the norm exceeds max_norm.
    if max_norm is None:
        return gradient
    norm = gradient.norm(dim=-1, keepdim=True)
    return gradient * torch.clamp(max_norm / (norm + 1e-6), max=1.0)


@contextlib.contextmanager
def _keyed_dropout(model: FlatModel, seed: int, round_index: int, client: int):
    """Dropout draws from torch's default CPU generator: fork it and key it by (seed, round, client).

    Only the CPU generator is seeded (torch.manual_seed would also initialise CUDA, costing milliseconds per call)."""
    if not any(isinstance(m, torch.nn.Dropout) for m in model.module.modules()):
        yield
        return
    with torch.random.fork_rng(devices=[]):
        key = seed_sequence(seed, "dropout", round_index, client).generate_state(1)[0]
        torch.default_generator.manual_seed(int(key))
        yield


def train_clients_loop(model: FlatModel, data: ClientData, clients: torch.Tensor, starts: torch.Tensor,
                       spec: LocalSpec, correction: LocalCorrection | None, seed: int, round_index: int) -> LocalResult:
    ends = torch.empty_like(starts)
    losses = torch.zeros(len(clients), dtype=torch.float64)
    correct = torch.zeros(len(clients), dtype=torch.float64)
    model.module.train()
    weights, gradient_buffer = model.flat, model.flat_grad
    for j, client in enumerate(clients.tolist()):
        raise_if_requested()
        weights.copy_(starts[j])
        row_correction = None if correction is None else correction.row(j)
        with _keyed_dropout(model, seed, round_index, client):
            for x, y in data.client_stream(seed, round_index, client, spec.steps, spec.batch_size):
                raise_if_requested()
                gradient_buffer.zero_()
                logits = model.module(x)
                loss = F.cross_entropy(logits, y)
                loss.backward()
                gradient = _clip(gradient_buffer, spec.grad_clip)
                if row_correction is not None:
                    gradient = row_correction.apply(gradient, weights)
                weights.sub_(spec.lr * gradient)
                losses[j] += loss.item()
                correct[j] += (logits.argmax(1) == y).double().mean().item()
        ends[j] = weights
    steps = max(spec.steps, 1)
    return LocalResult(starts, ends, losses / steps, correct / steps)


def train_clients_vmap(model: FlatModel, data: ClientData, clients: torch.Tensor, starts: torch.Tensor,
                       spec: LocalSpec, correction: LocalCorrection | None, seed: int, round_index: int) -> LocalResult:
    def loss_and_logits(weights, x, y):
        logits = model(weights, x)
        return F.cross_entropy(logits, y), logits

    # Dropout masks under vmap come from the default generator, not keyed per client: loop == vmap holds exactly
    # only for models without dropout (all but the CINIC-10 CNN).
    batched_grad = vmap(grad(loss_and_logits, has_aux=True), randomness="different")
    client_list = clients.tolist()
    streams = [data.client_stream(seed, round_index, c, spec.steps, spec.batch_size) for c in client_list]
    weights = starts.detach().clone()
    losses = torch.zeros(len(client_list), dtype=torch.float64, device=starts.device)
    correct = torch.zeros(len(client_list), dtype=torch.float64, device=starts.device)
    model.module.train()
    for _ in range(spec.steps):
        raise_if_requested()
        batches = [next(stream) for stream in streams]
        x = torch.stack([b[0] for b in batches])
        y = torch.stack([b[1] for b in batches])
        gradient, logits = batched_grad(weights, x, y)
        gradient = _clip(gradient, spec.grad_clip)
        if correction is not None:
            gradient = correction.apply(gradient, weights)
        weights = weights - spec.lr * gradient
        with torch.no_grad():
            losses += vmap(F.cross_entropy)(logits, y).double()
            correct += (logits.argmax(-1) == y).double().mean(-1)
    steps = max(spec.steps, 1)
    return LocalResult(starts, weights, (losses / steps).cpu(), (correct / steps).cpu())


def vmap_supported(model: FlatModel) -> bool:
    """vmap cannot batch the fused LSTM kernel; such models use the loop."""
    return not any(isinstance(m, torch.nn.RNNBase) for m in model.module.modules())


def train_clients(model: FlatModel, data: ClientData, clients: torch.Tensor, starts: torch.Tensor, spec: LocalSpec,
                  correction: LocalCorrection | None, seed: int, round_index: int, batched: bool) -> LocalResult:
    """Run local SGD for `clients` from `starts` [n, d]; `batched` picks the vmap implementation."""
    if len(clients) == 0:
        empty = starts.new_zeros(0)
        return LocalResult(starts, starts.clone(), empty.double().cpu(), empty.double().cpu())
    implementation = train_clients_vmap if batched else train_clients_loop
    return implementation(model, data, clients, starts, spec, correction, seed, round_index)
