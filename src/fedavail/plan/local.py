"""`training.local`, an experiment's local optimisation, resolved once (an algorithm's own `lr` overrides the block's).
With `epochs: E` and `max_steps: K` a client continues its epoch at its next participation, as the FAST code's
persistent data iterator does: with E = 1 it takes min(⌈n_i/B⌉ − b_i, K) steps, b_i the batches of its current epoch
it already took."""

import math
from dataclasses import asdict, dataclass

from fedavail.options import check_fields, check_int, check_keys, check_value, is_bool, is_number, key_table, must, option

OPTIMIZERS = ("sgd", "momentum", "adam")
SCHEDULES = ("constant", "sqrt_decay", "multistep")
OPTIMIZER_STATES = ("reset", "persistent")
DEFAULT_STEPS = 10
# Samples per minibatch: more only stalls a round (batch_size 100,000 did not finish round 0 in a minute), and no
# bundled or paper dataset needs it. A batch larger than the dataset's training samples is refused as well
# (fedavail.plan.checks).
MAX_BATCH_SIZE = 8192


def _finite(bound: str, test):
    """A check of a finite number within `bound`."""
    def check(value) -> None:
        if not is_number(value):
            raise ValueError(f"must be a finite number, got {value!r}")
        if not test(value):
            raise ValueError(f"must be {bound}, got {value!r}")
    return check


def _check_batch_size(value) -> None:
    check_int(value)
    if value > MAX_BATCH_SIZE:
        raise ValueError(f"{value} samples per minibatch, more than MAX_BATCH_SIZE = {MAX_BATCH_SIZE}; lower it")


def _betas(betas) -> bool:
    return len(betas) == 2 and all(is_number(beta) and 0 <= beta < 1 for beta in betas)


def _increasing_rounds(rounds) -> bool:
    return all(not is_bool(t) and isinstance(t, int) and t >= 1 for t in rounds) and list(rounds) == sorted(rounds)


_POSITIVE = _finite("> 0", lambda value: value > 0)


@dataclass(frozen=True)
class LocalOptions:
    lr: float = option(doc="initial local learning rate η0 (an algorithm's own lr overrides it)", check=_POSITIVE)
    optimizer: str = option("sgd", "sgd: plain SGD; momentum: PyTorch's heavy ball SGD(momentum=μ), dampening 0; "
                            "adam: PyTorch's Adam; weight_decay is PyTorch's L2 term for each", choices=OPTIMIZERS)
    momentum: float = option(0.9, "μ of optimizer momentum, in [0, 1)",
                             check=_finite("in [0, 1)", lambda value: 0 <= value < 1))
    betas: tuple[float, float] = option((0.9, 0.999), "Adam's [β1, β2], each in [0, 1)",
                                        check=must("two numbers [β1, β2], each in [0, 1)", _betas))
    eps: float = option(1e-8, "Adam's ε", check=_POSITIVE)
    weight_decay: float = option(0.0, "L2 weight decay of the optimizer", check=_finite(">= 0", lambda v: v >= 0))
    schedule: str = option("constant", "η_t: constant; sqrt_decay η0 / sqrt(t/10 + 1) (FedSWE App. H); multistep "
                           "η0 · gamma^(milestones reached)", choices=SCHEDULES)
    milestones: tuple[int, ...] = option((), "rounds at which multistep multiplies the rate by gamma (increasing)",
                                         check=must("increasing rounds >= 1", _increasing_rounds))
    gamma: float = option(0.1, "multistep's factor", check=_POSITIVE)
    steps: int | None = option(None, f"K minibatches of exactly batch_size samples per round, the client's data "
                               f"reshuffled whenever it runs out; null with epochs null: {DEFAULT_STEPS}",
                               check=check_int)
    epochs: int | None = option(None, "E passes over the client's data per round instead of steps; the last batch of "
                                "an epoch may be partial", check=check_int)
    max_steps: int | None = option(None, "with epochs: at most this many steps per round; the rest of the epoch "
                                   "continues at the client's next participation (as the FAST authors' data "
                                   "iterator does)", check=check_int)
    batch_size: int = option(128, f"B, samples per minibatch, at most {MAX_BATCH_SIZE} and the dataset's training "
                             f"samples", check=_check_batch_size)
    shuffle: bool = option(True, "draw minibatches from reshuffles of the client's data, keyed by (seed, client, "
                           "epoch); false: in the partition's order (FAST's Fashion-MNIST and Shakespeare loaders do "
                           "not shuffle)", check=must("true or false", is_bool))
    grad_clip: float | None = option(None, "max L2 norm of every minibatch gradient; null: no clipping (no author "
                                     "codebase clips per gradient)", check=_POSITIVE)
    optimizer_state: str = option("reset", "reset: fresh optimizer state every round; persistent: each client keeps "
                                  "its momentum / Adam moments across rounds as [m, d] tensors (two for Adam, plus [m] "
                                  "step counts; the FAST code's per-client optimizer objects), checkpointed with the "
                                  "run and counted in its state bytes", choices=OPTIMIZER_STATES)

    def __post_init__(self):
        check_fields(self)
        if self.milestones and self.schedule != "multistep":
            raise ValueError(f"milestones: only used by schedule 'multistep' (schedule is {self.schedule!r})")
        if (self.steps is None) == (self.epochs is None):
            raise ValueError("steps: give either steps or epochs, not both")
        if self.steps is not None and self.max_steps is not None:
            raise ValueError("max_steps: caps epochs; with steps the count is already fixed")
        if self.optimizer == "sgd" and self.optimizer_state == "persistent":
            raise ValueError("optimizer_state: plain sgd has no state to persist (optimizer is 'sgd')")

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
    try:
        if "lr" in values:  # the block's own lr, checked also where an algorithm's replaces it
            check_value(_POSITIVE, values["lr"], "lr")
        if algorithm_lr is not None:
            values["lr"] = algorithm_lr
        if "lr" not in values:
            raise ValueError("lr: missing; give it here or as the algorithm's own lr")
        check_keys(values, key_table(LocalOptions))
        if values.get("steps") is None and values.get("epochs") is None:
            values["steps"] = DEFAULT_STEPS
        for key in ("betas", "milestones"):
            if key in values:
                if not isinstance(values[key], list | tuple):
                    raise ValueError(f"{key}: must be a list, got {values[key]!r}")
                values[key] = tuple(values[key])
        return LocalOptions(**values)
    except ValueError as error:
        raise ValueError(f"{where}.{error}") from error

