"""Local training of a round's participants, from the start points the algorithm chose, with the experiment's local
settings (fedavail.plan.local). Two interchangeable back ends, a per-client loop and a batched one over stacked
client parameters (each client's gradient from torch.func's vmap(grad), or on the CPU for plain CNNs from
fedavail.engine.grouped), consume the same keyed minibatches and optimizer formula (engine.optim), so their end
points agree up to floating-point reassociation. Per-client state that outlives
a round (optimizer moments with `optimizer_state: persistent`; the epoch cursor and running training accuracy of
epoch-based work) lives in the [m, ...] tables of `ClientTrainer.init_state`, checkpointed with the algorithm state."""

import contextlib
import functools
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import grad, vmap

from fedavail.engine import grouped
from fedavail.engine.client_data import ClientData
from fedavail.engine.optim import LocalOptimizer
from fedavail.engine.params import FlatModel
from fedavail.plan.local import LocalOptions
from fedavail.rng import seed_sequence, torch_generator
from fedavail.stopping import raise_if_requested


@dataclass
class LocalCorrection:
    """g <- g + prox_mu * (w - anchor) + drift, added to each minibatch gradient before the optimizer step.

    FedProx: prox_mu = μ, anchor = the round's start model. SCAFFOLD: drift = c - c_i, and mean_gradient asks for each
    client's mean raw minibatch gradient over its local steps (LocalResult.mean_gradient: its new c_i)."""

    prox_mu: float = 0.0
    anchor: torch.Tensor | None = None  # [n, d]
    drift: torch.Tensor | None = None  # [n, d]
    mean_gradient: bool = False

    def rows(self, part: slice | torch.Tensor) -> "LocalCorrection":
        """The correction of clients `part` alone (a slice, or positions)."""
        return LocalCorrection(self.prox_mu, None if self.anchor is None else take_rows(self.anchor, part),
                               None if self.drift is None else take_rows(self.drift, part), self.mean_gradient)

    def apply(self, gradient: torch.Tensor, weights: torch.Tensor, row: int | slice = slice(None)) -> torch.Tensor:
        """The corrected gradient of every client [n, d], or of client `row` alone [d]."""
        if self.prox_mu:
            gradient = gradient + self.prox_mu * (weights - self.anchor[row])
        if self.drift is not None:
            gradient = gradient + self.drift[row]
        return gradient


@dataclass
class LocalResult:
    start: torch.Tensor  # [n, d]
    end: torch.Tensor  # [n, d]
    loss: torch.Tensor  # [n] mean minibatch loss over the round's local steps
    accuracy: torch.Tensor  # [n] mean minibatch accuracy over the round's local steps
    steps: torch.Tensor | None = None  # [n] int64: local steps each client took
    running_accuracy: torch.Tensor | None = None  # [n]: mean minibatch accuracy since the client's epoch began
    # [n, d]: mean over the local steps of the raw minibatch gradient (after the clip, before the correction and the
    # optimizer's weight decay); only when the correction asks for it
    mean_gradient: torch.Tensor | None = None


@dataclass
class ClientPlan:
    """One client's local work this round. It names its client, seed and data, so that one back-end call can serve
    several seeds' clients (each seed has its own partition; the data tensors are shared)."""

    client: int
    seed: int
    data: ClientData
    batches: list[torch.Tensor]  # sample positions per step
    epoch_ends: list[bool]  # which steps end an epoch
    generator: torch.Generator  # augments its batches
    cursor: tuple[int, int] | None = None  # (epoch, batches taken of it) after this round, for epoch-based work


@dataclass
class LocalWork:
    """One seed's share of a round's local training; its per-client tables `state` are updated in place."""

    trainer: "ClientTrainer"
    clients: torch.Tensor  # [n]
    starts: torch.Tensor  # [n, d]
    correction: LocalCorrection | None
    state: dict[str, torch.Tensor]


def take_rows(table: torch.Tensor, part: slice | torch.Tensor) -> torch.Tensor:
    """Rows `part` of `table` [n, ...]: a slice is a view; positions are gathered with index_select, which copies
    whole rows (advanced indexing, table[positions], goes element by element on the CPU: 3-5x slower for [n, d])."""
    return table[part] if isinstance(part, slice) else table.index_select(0, part)


def clip_gradient(gradient: torch.Tensor, max_norm: float | None) -> torch.Tensor:
    # Matches torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when the norm exceeds max_norm.
    if max_norm is None:
        return gradient
    norm = gradient.norm(dim=-1, keepdim=True)
    return gradient * torch.clamp(max_norm / (norm + 1e-6), max=1.0)


@contextlib.contextmanager
def _keyed_dropout(model: FlatModel, seed: int, round_index: int, client: int):
    """Dropout draws from torch's default CPU generator: fork it and key it by (seed, round, client). Only the CPU
    generator is seeded (torch.manual_seed would also initialise CUDA, costing milliseconds per call)."""
    if not any(isinstance(m, torch.nn.Dropout) for m in model.module.modules()):
        yield
        return
    with torch.random.fork_rng(devices=[]):
        key = seed_sequence(seed, "dropout", round_index, client).generate_state(1)[0]
        torch.default_generator.manual_seed(int(key))
        yield


def vmap_supported(model: FlatModel) -> bool:
    """vmap cannot batch the fused LSTM kernel; such models use the loop."""
    return not any(isinstance(m, torch.nn.RNNBase) for m in model.module.modules())


class ClientTrainer:
    def __init__(self, model: FlatModel, data: ClientData, options: LocalOptions, seed: int, batched: bool = False):
        if batched and not vmap_supported(model):
            raise ValueError("this model cannot be batched with vmap (LSTM); use the per-client loop")
        self.model, self.data, self.options, self.seed, self.batched = model, data, options, seed, batched
        self.optimizer = LocalOptimizer(options)

    def init_state(self, num_clients: int, dtype: torch.dtype, device: torch.device) -> dict[str, torch.Tensor]:
        """Per-client tables that persist across rounds (empty for plain steps with reset optimizer state)."""
        state = {}
        if self.options.optimizer_state == "persistent":
            state.update(self.optimizer.init_rows(num_clients, self.model.dim, dtype, device))
        if self.options.epochs is not None:
            for key in ("epoch", "epoch_batch", "epoch_acc_sum", "epoch_acc_batches"):
                table_dtype = torch.float64 if key == "epoch_acc_sum" else torch.int64
                state[key] = torch.zeros(num_clients, dtype=table_dtype, device=device)
        return state

    def train(self, clients: torch.Tensor, starts: torch.Tensor, correction: LocalCorrection | None,
              round_index: int, lr: float, state: dict[str, torch.Tensor]) -> LocalResult:
        """Local work of `clients` [n] from `starts` [n, d]; their rows of `state` are updated in place."""
        return train_together([LocalWork(self, clients, starts, correction, state)], round_index, lr)[0]

    def plan(self, client: int, round_index: int, state: dict[str, torch.Tensor]) -> ClientPlan:
        o, data = self.options, self.data
        if o.steps is not None:
            batches, generator = data.step_batches(self.seed, round_index, client, o.steps, o.batch_size)
            return ClientPlan(client, self.seed, data, batches, [False] * o.steps, generator)
        epoch, position = int(state["epoch"][client]), int(state["epoch_batch"][client])
        batches, epoch_ends, epochs_done = [], [], 0
        while epochs_done < o.epochs and (o.max_steps is None or len(batches) < o.max_steps):
            order = data.epoch_order(self.seed, client, epoch, o.shuffle)
            count = -(-len(order) // o.batch_size)
            take = count - position if o.max_steps is None else min(count - position, o.max_steps - len(batches))
            for b in range(position, position + take):
                batches.append(order[b * o.batch_size:(b + 1) * o.batch_size])
                epoch_ends.append(b == count - 1)
            position += take
            if position < count:
                break
            epoch, position, epochs_done = epoch + 1, 0, epochs_done + 1
        generator = torch_generator(self.seed, "augmentation", round_index, client, device=data.device)
        return ClientPlan(client, self.seed, data, batches, epoch_ends, generator, (epoch, position))


def train_together(works: list[LocalWork], round_index: int, lr: float) -> list[LocalResult]:
    """One back-end call for the local work of several seeds' participants (same model, settings and back end; their own
    partitions, keyed streams and tables): one batched call over seeds x clients on the batched back end. Every
    client's minibatches, dropout and optimizer rows are keyed by its own seed, so each seed's results are its separate
    run's (exactly on the loop; batched, up to batched kernels' reassociation). Per-client tables change only after
    the whole round's local work: a stop request mid-round leaves them as at the round's start, which a checkpoint
    records."""
    trainer = works[0].trainer
    if not all(w.trainer.model is trainer.model and w.trainer.options == trainer.options
               and w.trainer.batched == trainer.batched for w in works):
        raise ValueError("local work trained together must share one model, one local setting and one back end")
    plans = [[w.trainer.plan(client, round_index, w.state) for client in w.clients.tolist()] for w in works]
    flat_plans = [plan for p in plans for plan in p]
    starts = _joined([w.starts for w in works])
    correction = _joined_correction([w.correction for w in works])
    persistent = trainer.options.optimizer_state == "persistent"
    if persistent:
        optimizer_rows = {k: _joined([take_rows(w.state[k], w.clients.to(starts.device)) for w in works])
                          for k in trainer.optimizer.keys}
    else:
        optimizer_rows = trainer.optimizer.init_rows(len(starts), trainer.model.dim, starts.dtype, starts.device)
    gradient_sums = torch.zeros_like(starts) if correction is not None and correction.mean_gradient else None
    trainer.model.module.train()
    back_end = _train_batched if trainer.batched and flat_plans else _train_loop  # the loop: also a round without work
    ends, step_losses, step_accuracies = back_end(trainer, flat_plans, starts, correction, round_index, lr,
                                                  optimizer_rows, gradient_sums)
    steps = torch.tensor([len(v) for v in step_losses], dtype=torch.int64)
    loss = torch.tensor([sum(v) / len(v) for v in step_losses], dtype=torch.float64)
    accuracy = torch.tensor([sum(v) / len(v) for v in step_accuracies], dtype=torch.float64)
    if gradient_sums is not None:
        gradient_sums = gradient_sums / steps.to(gradient_sums.device, gradient_sums.dtype)[:, None]
    results, offset = [], 0
    for work, work_plans in zip(works, plans):
        part = slice(offset, offset + len(work_plans))
        offset += len(work_plans)
        clients, state, running = work.clients.to(work.starts.device), work.state, accuracy[part]
        if persistent:
            for key in trainer.optimizer.keys:
                state[key].index_copy_(0, clients, optimizer_rows[key][part])
        if "epoch" in state and work_plans:
            running = _running_accuracy(clients, work_plans, step_accuracies[part], state)
            cursors = torch.tensor([p.cursor for p in work_plans], dtype=torch.int64, device=clients.device)
            state["epoch"].index_copy_(0, clients, cursors[:, 0])
            state["epoch_batch"].index_copy_(0, clients, cursors[:, 1])
        results.append(LocalResult(work.starts, ends[part], loss[part], accuracy[part], steps[part], running,
                                   None if gradient_sums is None else gradient_sums[part]))
    return results


def _running_accuracy(rows, plans, step_accuracies, state) -> torch.Tensor:
    """Each client's mean minibatch accuracy since its current epoch began, read at its last step of the round; a
    step that ends an epoch reports that epoch's mean and then resets (the FAST code's per-client metric)."""
    sums, counts = state["epoch_acc_sum"], state["epoch_acc_batches"]
    running = torch.empty(len(plans), dtype=torch.float64)
    for j, (plan, accuracies) in enumerate(zip(plans, step_accuracies)):
        row = int(rows[j])
        total, count = float(sums[row]), int(counts[row])
        for accuracy, ends in zip(accuracies, plan.epoch_ends):
            total, count = total + accuracy, count + 1
            running[j] = total / count
            if ends:
                total, count = 0.0, 0
        sums[row], counts[row] = total, count
    return running


def _joined(rows: list[torch.Tensor]) -> torch.Tensor:
    """Several seeds' rows as one tensor; one seed's as they are (no copy)."""
    return rows[0] if len(rows) == 1 else torch.cat(rows)


def _joined_correction(corrections: list[LocalCorrection | None]) -> LocalCorrection | None:
    """Several seeds' corrections as one over all their rows (the same algorithm gives them the same form)."""
    forms = {None if c is None else (c.prox_mu, c.mean_gradient, c.anchor is None, c.drift is None)
             for c in corrections}
    if len(forms) > 1:
        raise ValueError("local work trained together must have corrections of one form")
    first = corrections[0]
    if first is None:
        return None
    anchor = None if first.anchor is None else torch.cat([c.anchor for c in corrections])
    drift = None if first.drift is None else torch.cat([c.drift for c in corrections])
    return LocalCorrection(first.prox_mu, anchor, drift, first.mean_gradient)


def _train_loop(trainer, plans, starts, correction, round_index, lr, optimizer_rows, gradient_sums):
    model, options = trainer.model, trainer.options
    ends = torch.empty_like(starts)
    step_losses, step_accuracies = [], []
    weights, gradient_buffer = model.flat, model.flat_grad
    for j, plan in enumerate(plans):
        raise_if_requested()
        weights.copy_(starts[j])
        row_state = {k: v[j] for k, v in optimizer_rows.items()}  # views: stepped in place
        losses, accuracies = [], []
        with _keyed_dropout(model, plan.seed, round_index, plan.client):
            for positions in plan.batches:
                raise_if_requested()
                x, y = plan.data.batch(positions, plan.generator)
                gradient_buffer.zero_()
                logits = model.module(x)
                loss = F.cross_entropy(logits, y)
                loss.backward()
                gradient = clip_gradient(gradient_buffer, options.grad_clip)
                if gradient_sums is not None:
                    gradient_sums[j] += gradient
                if correction is not None:
                    gradient = correction.apply(gradient, weights, j)
                trainer.optimizer.step_(weights, gradient, row_state, lr)
                losses.append(loss.item())
                accuracies.append((logits.argmax(1) == y).double().mean().item())
        ends[j] = weights
        step_losses.append(losses)
        step_accuracies.append(accuracies)
    return ends, step_losses, step_accuracies


def _step_positions(plans, width, device):
    """Every client's sample positions per step, [steps, n, width], and which of them are real samples (a partial
    batch is padded with weight-0 copies of a sample of its own). Clients come in order of decreasing steps, so the
    clients still working at a step are a prefix; positions past a client's last step are never read."""
    steps = len(plans[0].batches)
    sizes = np.zeros((len(plans), steps), dtype=np.int64)
    for j, plan in enumerate(plans):
        sizes[j, :len(plan.batches)] = [len(batch) for batch in plan.batches]
    mask = torch.from_numpy(np.arange(width) < sizes[..., None]).to(device)
    placeholders = torch.stack([plan.batches[0][0] for plan in plans])
    positions = placeholders[:, None, None].expand(len(plans), steps, width).clone()
    positions[mask] = torch.cat([batch for plan in plans for batch in plan.batches])  # row-major: as listed
    return positions.transpose(0, 1), mask.transpose(0, 1), sizes.T.tolist()


def _step_inputs(plans, positions, sizes, data):
    """This step's minibatches of the clients `plans`, [n, width, ...]: one gather from the shared train set;
    augmented per client with its own generator, real samples only, as the loop augments them."""
    flat = positions.reshape(-1)
    x = data.inputs(data.x[flat])
    x = x.view(*positions.shape, *x.shape[1:])
    if data.kind == "image" and data.augmentation.active:
        for j, (plan, size) in enumerate(zip(plans, sizes)):
            x[j, :size] = plan.data.batch(positions[j, :size], plan.generator)[0]
    return x, data.y[flat].view(positions.shape)


# Most clients per batched call on the CPU: beyond a few dozen a step's activations and gradients leave the caches
# and per-sample time stops falling (benchmarks/roofline.py); on CUDA all go at once.
CPU_BATCH_WIDTH = 64


def _train_batched(trainer, plans, starts, correction, round_index, lr, optimizer_rows, gradient_sums):
    """The clients in order of decreasing local steps, so that those still working at a step are a prefix of the
    batch and a step trains only them; on the CPU in calls of equal width, at most CPU_BATCH_WIDTH clients."""
    if any(p.data.x is not plans[0].data.x for p in plans):
        raise ValueError("local work trained together must share one train set")
    order = sorted(range(len(plans)), key=lambda j: -len(plans[j].batches))
    # Equal local work (`steps: K`) keeps the clients' order: their rows are trained where they are.
    index = None if order == list(range(len(plans))) else torch.tensor(order, device=starts.device)
    if index is None:
        weights, rows, sums = starts.clone(), optimizer_rows, gradient_sums
    else:
        weights = take_rows(starts, index)
        rows = {key: take_rows(value, index) for key, value in optimizer_rows.items()}
        sums = None if gradient_sums is None else take_rows(gradient_sums, index)
        correction = None if correction is None else correction.rows(index)
    calls = -(-len(plans) // CPU_BATCH_WIDTH) if starts.device.type == "cpu" else 1
    bounds = [len(plans) * c // calls for c in range(calls + 1)]  # calls of equal width, not one short remainder
    step_losses, step_accuracies = [], []
    for part in (slice(a, b) for a, b in zip(bounds, bounds[1:])):
        losses, accuracies = _train_batched_part(
            trainer, [plans[j] for j in order[part]], weights[part], None if correction is None else
            correction.rows(part), lr, {key: value[part] for key, value in rows.items()},
            None if sums is None else sums[part])
        step_losses += losses
        step_accuracies += accuracies
    if index is None:
        return weights, step_losses, step_accuracies
    for key, value in rows.items():
        optimizer_rows[key].index_copy_(0, index, value)
    if sums is not None:
        gradient_sums.index_copy_(0, index, sums)
    ends = torch.empty_like(weights).index_copy_(0, index, weights)
    position = {j: rank for rank, j in enumerate(order)}
    return (ends, [step_losses[position[j]] for j in range(len(plans))],
            [step_accuracies[position[j]] for j in range(len(plans))])


def _batched_gradient(model: FlatModel, device: torch.device):
    """(weights [n, d], x, y, sample weights) -> (each client's gradient of its weighted mean loss [n, d], logits):
    written out layer by layer (fedavail.engine.grouped) for the CNNs it supports on the CPU, where it is faster;
    torch.func's vmap(grad) otherwise."""
    if device.type == "cpu" and grouped.supports(model):
        return functools.partial(grouped.loss_gradient, model)

    def loss_and_logits(client_weights, x, y, sample_weights):
        logits = model(client_weights, x)
        losses = F.cross_entropy(logits, y, reduction="none")
        return (losses * sample_weights).sum() / sample_weights.sum().clamp_min(1), logits

    # Dropout masks under vmap come from the default generator, not keyed per client: loop == vmap holds exactly
    # only for models without dropout.
    return vmap(grad(loss_and_logits, has_aux=True), randomness="different")


def _train_batched_part(trainer, plans, weights, correction, lr, optimizer_rows, gradient_sums):
    """Local work of `plans` (in order of decreasing steps) from `weights` [n, d]; the weights, optimizer rows and
    gradient sums are updated in place. Returns each client's step losses and accuracies."""
    model, options, data = trainer.model, trainer.options, plans[0].data
    batched_grad = _batched_gradient(model, weights.device)
    lengths = [len(p.batches) for p in plans]
    width = max(len(b) for p in plans for b in p.batches)
    positions, masks, sizes = _step_positions(plans, width, weights.device)
    loss_steps, accuracy_steps = [], []
    for step in range(lengths[0]):
        raise_if_requested()
        working = sum(length > step for length in lengths)  # a prefix: the clients whose work goes on
        x, y = _step_inputs(plans[:working], positions[step, :working], sizes[step][:working], data)
        mask = masks[step, :working].to(x.dtype)
        active = weights[:working]
        gradient, logits = batched_grad(active, x, y, mask)
        gradient = clip_gradient(gradient, options.grad_clip)
        if gradient_sums is not None:
            gradient_sums[:working] += gradient
        if correction is not None:
            gradient = correction.rows(slice(0, working)).apply(gradient, active)
        trainer.optimizer.step_(active, gradient, {k: v[:working] for k, v in optimizer_rows.items()}, lr)
        with torch.no_grad():
            losses = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(y.shape)
            correct = (logits.argmax(-1) == y).to(mask.dtype)
            samples = mask.sum(-1).clamp_min(1)
            # Kept on the device: read once after the round, so no step waits for the host.
            loss_steps.append((losses * mask).sum(-1) / samples)
            accuracy_steps.append((correct * mask).sum(-1) / samples)
    # Step s holds the first (number of clients with more than s steps) clients: client j's values are its column.
    losses, accuracies = (torch.cat(values).double().cpu().tolist() for values in (loss_steps, accuracy_steps))
    offsets = np.concatenate([[0], np.cumsum([len(v) for v in loss_steps])])
    return tuple([[values[offsets[s] + j] for s in range(length)] for j, length in enumerate(lengths)]
                 for values in (losses, accuracies))
