"""`training.local`, an experiment's local optimisation, resolved once (an algorithm's own `lr` overrides the block's).
With `epochs: E` and `max_steps: K` a client continues its epoch at its next participation, as the FAST code's
persistent data iterator does: with E = 1 it takes min(⌈n_i/B⌉ − b_i, K) steps, b_i the batches of its current epoch
it already took."""

import math
from dataclasses import asdict, dataclass, fields

from fedavail.options import option

OPTIMIZERS = ("sgd", "momentum", "adam")
SCHEDULES = ("constant", "sqrt_decay", "multistep")
OPTIMIZER_STATES = ("reset", "persistent")
DEFAULT_STEPS = 10
# Samples per minibatch: more only stalls a round (batch_size 100,000 did not finish round 0 in a minute), and no
# bundled or paper dataset needs it. A batch larger than the dataset's training samples is refused as well
# (fedavail.plan.checks).
MAX_BATCH_SIZE = 8192


@dataclass(frozen=True)
class LocalOptions:
    lr: float = option(doc="initial local learning rate η0 (an algorithm's own lr overrides it)")
    optimizer: str = option("sgd", "sgd: plain SGD; momentum: PyTorch's heavy ball SGD(momentum=μ), dampening 0; "
                            "adam: PyTorch's Adam; weight_decay is PyTorch's L2 term for each", choices=OPTIMIZERS)
    momentum: float = option(0.9, "μ of optimizer momentum, in [0, 1)")
    betas: tuple[float, float] = option((0.9, 0.999), "Adam's [β1, β2], each in [0, 1)")
    eps: float = option(1e-8, "Adam's ε")
    weight_decay: float = option(0.0, "L2 weight decay of the optimizer")
    schedule: str = option("constant", "η_t: constant; sqrt_decay η0 / sqrt(t/10 + 1) (FedSWE App. H); multistep "
                           "η0 · gamma^(milestones reached)", choices=SCHEDULES)
    milestones: tuple[int, ...] = option((), "rounds at which multistep multiplies the rate by gamma (increasing)")
    gamma: float = option(0.1, "multistep's factor")
    steps: int | None = option(None, f"K minibatches of exactly batch_size samples per round, the client's data "
                               f"reshuffled whenever it runs out; null with epochs null: {DEFAULT_STEPS}")
    epochs: int | None = option(None, "E passes over the client's data per round instead of steps; the last batch of "
                                "an epoch may be partial")
    max_steps: int | None = option(None, "with epochs: at most this many steps per round; the rest of the epoch "
                                   "continues at the client's next participation (as the FAST authors' data "
                                   "iterator does)")
    batch_size: int = option(128, f"B, samples per minibatch, at most {MAX_BATCH_SIZE} and the dataset's training "
                             f"samples")
    shuffle: bool = option(True, "draw minibatches from reshuffles of the client's data, keyed by (seed, client, "
                           "epoch); false: in the partition's order (FAST's Fashion-MNIST and Shakespeare loaders do "
                           "not shuffle)")
    grad_clip: float | None = option(None, "max L2 norm of every minibatch gradient; null: no clipping (no author "
                                     "codebase clips per gradient)")
    optimizer_state: str = option("reset", "reset: fresh optimizer state every round; persistent: each client keeps "
                                  "its momentum / Adam moments across rounds as [m, d] tensors (two for Adam, plus [m] "
                                  "step counts; the FAST code's per-client optimizer objects), checkpointed with the "
                                  "run and counted in its state bytes", choices=OPTIMIZER_STATES)

    def lr_at(self, round_index: int) -> float:
        """η_l at round t."""
        if self.schedule == "sqrt_decay":
            return self.lr / math.sqrt(round_index / 10 + 1)
        if self.schedule == "multistep":
            return self.lr * self.gamma ** sum(1 for milestone in self.milestones if round_index >= milestone)
        return self.lr

    def as_dict(self) -> dict:
        values = asdict(self)
        values["betas"], values["milestones"] = list(self.betas), list(self.milestones)
        return values


def resolve_local(local: dict | None, algorithm_lr: float | None, where: str) -> LocalOptions:
    """The experiment's `training.local` block with the algorithm's own lr, checked (errors name the key under
    `where`), every default filled in."""
    values = dict(local or {})
    allowed = sorted(f.name for f in fields(LocalOptions))
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown key (allowed: {allowed})")
    if "lr" in values:
        _positive(values["lr"], "lr", where)  # the block's own lr, checked also where an algorithm's replaces it
    if algorithm_lr is not None:
        values["lr"] = algorithm_lr
    if "lr" not in values:
        raise ValueError(f"{where}.lr: missing; give it here or as the algorithm's own lr")
    if values.get("steps") is None and values.get("epochs") is None:
        values["steps"] = DEFAULT_STEPS
    for key in ("betas", "milestones"):
        if key in values:
            if not isinstance(values[key], list | tuple):
                raise ValueError(f"{where}.{key}: must be a list, got {values[key]!r}")
            values[key] = tuple(values[key])
    options = LocalOptions(**values)
    for name, allowed in (("optimizer", OPTIMIZERS), ("schedule", SCHEDULES), ("optimizer_state", OPTIMIZER_STATES)):
        if getattr(options, name) not in allowed:
            raise ValueError(f"{where}.{name}: must be one of {list(allowed)}, got {getattr(options, name)!r}")
    _check(options, where)
    return options


def _positive(value, name: str, where: str, integer: bool = False, allow_zero: bool = False) -> None:
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value):
        raise ValueError(f"{where}.{name}: must be a finite {'integer' if integer else 'number'}, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{where}.{name}: must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")


def _check(o: LocalOptions, where: str) -> None:
    for name in ("lr", "eps", "gamma", "weight_decay", "momentum"):
        _positive(getattr(o, name), name, where, allow_zero=name in ("weight_decay", "momentum"))
    if o.momentum >= 1:
        raise ValueError(f"{where}.momentum: must be < 1, got {o.momentum!r}")
    if len(o.betas) != 2:
        raise ValueError(f"{where}.betas: must be two numbers [β1, β2], got {list(o.betas)!r}")
    for beta in o.betas:
        _positive(beta, "betas", where, allow_zero=True)
        if beta >= 1:
            raise ValueError(f"{where}.betas: each must be in [0, 1), got {list(o.betas)!r}")
    for milestone in o.milestones:
        _positive(milestone, "milestones", where, integer=True)
    if list(o.milestones) != sorted(o.milestones):
        raise ValueError(f"{where}.milestones: must be increasing rounds, got {list(o.milestones)!r}")
    if o.milestones and o.schedule != "multistep":
        raise ValueError(f"{where}.milestones: only used by schedule 'multistep' (schedule is {o.schedule!r})")
    if (o.steps is None) == (o.epochs is None):
        raise ValueError(f"{where}: give either steps or epochs, not both")
    if o.steps is not None and o.max_steps is not None:
        raise ValueError(f"{where}.max_steps: caps epochs; with steps the count is already fixed")
    for name in ("steps", "epochs", "max_steps", "grad_clip"):
        if getattr(o, name) is not None:
            _positive(getattr(o, name), name, where, integer=name != "grad_clip")
    _positive(o.batch_size, "batch_size", where, integer=True)
    if o.batch_size > MAX_BATCH_SIZE:
        raise ValueError(f"{where}.batch_size: {o.batch_size} samples per minibatch, more than MAX_BATCH_SIZE = "
                         f"{MAX_BATCH_SIZE}; lower it")
    if not isinstance(o.shuffle, bool):
        raise ValueError(f"{where}.shuffle: must be true or false, got {o.shuffle!r}")
    if o.optimizer == "sgd" and o.optimizer_state == "persistent":
        raise ValueError(f"{where}.optimizer_state: plain sgd has no state to persist (optimizer is 'sgd')")

