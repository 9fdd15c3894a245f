"""Local training of a round's participants, from the start points the algorithm chose, with the experiment's local
settings (fedavail.plan.local). Two interchangeable back ends, a per-client loop (the fast path on CPU) and a
torch.func.vmap over stacked client parameters (the default on CUDA), consume the same keyed minibatches and optimizer
formula (engine.optim), so their end points agree up to floating-point reassociation. Per-client state that outlives
a round (optimizer moments with `optimizer_state: persistent`; the epoch cursor and running training accuracy of
epoch-based work) lives in the [m, ...] tables of `ClientTrainer.init_state`, checkpointed with the algorithm state."""

import contextlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.func import grad, vmap

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
    partitions, keyed streams and tables): one vmap over seeds x clients on the batched back end. Every client's
    minibatches, dropout and optimizer rows are keyed by its own seed, so each seed's results are its separate run's
    (exactly on the loop; on vmap up to batched kernels' reassociation). Per-client tables change only after the whole
    round's local work: a stop request mid-round leaves them as at the round's start, which a checkpoint records."""
    trainer = works[0].trainer
    if not all(w.trainer.model is trainer.model and w.trainer.options == trainer.options
               and w.trainer.batched == trainer.batched for w in works):
        raise ValueError("local work trained together must share one model, one local setting and one back end")
    plans = [[w.trainer.plan(client, round_index, w.state) for client in w.clients.tolist()] for w in works]
    flat_plans = [plan for p in plans for plan in p]
    starts = torch.cat([w.starts for w in works])
    correction = _joined_correction([w.correction for w in works])
    persistent = trainer.options.optimizer_state == "persistent"
    if persistent:
        optimizer_rows = {k: torch.cat([w.state[k][w.clients.to(starts.device)] for w in works])
                          for k in trainer.optimizer.keys}
    else:
        optimizer_rows = trainer.optimizer.init_rows(len(starts), trainer.model.dim, starts.dtype, starts.device)
    gradient_sums = torch.zeros_like(starts) if correction is not None and correction.mean_gradient else None
    trainer.model.module.train()
    back_end = _train_vmap if trainer.batched and flat_plans else _train_loop  # the loop: also a round without work
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
        row_state = {k: v[j] for k, v in optimizer_rows.items()}
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
                new_weights, row_state = trainer.optimizer.step(weights, gradient, row_state, lr)
                weights.copy_(new_weights)
                losses.append(loss.item())
                accuracies.append((logits.argmax(1) == y).double().mean().item())
        for key, value in row_state.items():
            optimizer_rows[key][j] = value
        ends[j] = weights
        step_losses.append(losses)
        step_accuracies.append(accuracies)
    return ends, step_losses, step_accuracies


def _step_inputs(plans, step, width, device):
    """Every client's minibatch of this step, padded to `width` samples with weight-0 copies; a client whose work is
    done gets a placeholder sample of weight 0 (its rows are kept as they are)."""
    xs, ys, masks = [], [], []
    for plan in plans:
        is_active = step < len(plan.batches)
        if is_active:
            x, y = plan.data.batch(plan.batches[step], plan.generator)
        else:
            positions = plan.batches[-1][:1]
            x, y = plan.data.inputs(plan.data.x[positions]), plan.data.y[positions]
        pad = width - len(y)
        masks.append(torch.cat([torch.full((len(y),), float(is_active), dtype=x.dtype, device=device),
                                torch.zeros(pad, dtype=x.dtype, device=device)]))
        xs.append(torch.cat([x, x[:1].expand(pad, *x.shape[1:])]) if pad else x)
        ys.append(torch.cat([y, y[:1].expand(pad)]) if pad else y)
    return torch.stack(xs), torch.stack(ys), torch.stack(masks)


def _train_vmap(trainer, plans, starts, correction, round_index, lr, optimizer_rows, gradient_sums):
    model, options = trainer.model, trainer.options

    def loss_and_logits(weights, x, y, sample_weights):
        logits = model(weights, x)
        losses = F.cross_entropy(logits, y, reduction="none")
        return (losses * sample_weights).sum() / sample_weights.sum().clamp_min(1), logits

    # Dropout masks under vmap come from the default generator, not keyed per client: loop == vmap holds exactly
    # only for models without dropout.
    batched_grad = vmap(grad(loss_and_logits, has_aux=True), randomness="different")
    device = starts.device
    width = max(len(b) for p in plans for b in p.batches)
    lengths = [len(p.batches) for p in plans]
    counts = torch.tensor(lengths, device=device)
    weights = starts.detach().clone()
    loss_steps, accuracy_steps = [], []
    for step in range(max(lengths)):
        raise_if_requested()
        x, y, mask = _step_inputs(plans, step, width, device)
        gradient, logits = batched_grad(weights, x, y, mask)
        gradient = clip_gradient(gradient, options.grad_clip)
        # Every client is active until the shortest local work ends (always, with `steps`): no mask needed then.
        active = None if step < min(lengths) else step < counts
        if gradient_sums is not None:
            gradient_sums += gradient if active is None else torch.where(active[:, None], gradient, 0)
        if correction is not None:
            gradient = correction.apply(gradient, weights)
        weights, new_rows = trainer.optimizer.step(weights, gradient, optimizer_rows, lr, active)
        optimizer_rows.update(new_rows)
        with torch.no_grad():
            losses = (vmap(lambda lg, t: F.cross_entropy(lg, t, reduction="none"))(logits, y) * mask).sum(-1)
            correct = ((logits.argmax(-1) == y).to(mask.dtype) * mask).sum(-1)
            sizes = mask.sum(-1).clamp_min(1)
            # Kept on the device: read once after the round, so no step waits for the host.
            loss_steps.append(losses / sizes)
            accuracy_steps.append(correct / sizes)
    step_losses, step_accuracies = (
        [row[:n] for row, n in zip(torch.stack(values, 1).double().cpu().tolist(), lengths)]
        for values in (loss_steps, accuracy_steps))
    return weights, step_losses, step_accuracies
