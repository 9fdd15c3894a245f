"""An experiment's training block and the execution block, torch-free, each default written here only. Local
optimisation (`training.local`) is fedavail.plan.local."""

import re
from dataclasses import dataclass
from functools import partial

from fedavail.availability.trace_models import MAX_ROUNDS, check_rounds
from fedavail.options import check_fields, check_int, check_positive, is_bool, must, option
from fedavail.plan.names import MODEL_NAMES

DEVICE = re.compile(r"auto|cpu|cuda(:[0-9]+)?")


@dataclass(frozen=True, kw_only=True)
class AugmentationOptions:
    """Image augmentation of every local minibatch."""

    crop_padding: int = option(0, "random crop after zero padding by this many pixels; 0: no crop",
                               check=partial(check_int, minimum=0))
    horizontal_flip: bool = option(False, "flip each image horizontally with probability 1/2",
                                   check=must("true or false", is_bool))
    draw: str = option("per_image", "per_image: each image its own crop offset and flip; per_batch: one draw for the "
                       "whole minibatch (torchvision's transforms called on a batch tensor, as the FedAWE code does)",
                       choices=("per_image", "per_batch"))

    @property
    def active(self) -> bool:
        return self.crop_padding > 0 or self.horizontal_flip

    def __post_init__(self):
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class TrainingOptions:
    """`experiments.<name>.training`: what every run of the experiment trains."""

    model: str = option(doc="the model, by name", choices=tuple(MODEL_NAMES))
    rounds: int = option(doc=f"communication rounds R, at most {MAX_ROUNDS:,}", check=check_rounds)
    local: dict = option({}, "local optimisation, see training.local")
    eval_every: int = option(10, "evaluate the global model every this many rounds", check=check_int)
    last_n: int = option(20, "final rounds evaluated every round and averaged in the tables", check=check_int)
    train_eval_samples: int = option(2000, "training samples the training loss and accuracy are measured on",
                                     check=check_int)
    augmentation: dict = option({}, "see training.augmentation")

    def __post_init__(self):
        check_fields(self)
        if self.last_n > self.rounds:
            raise ValueError(f"last_n: {self.last_n} exceeds rounds {self.rounds}")


@dataclass(frozen=True, kw_only=True)
class ExperimentOptions:
    """`experiments.<name>`: every listed algorithm runs once per seed on the same partition and trace."""

    partition: str = option(doc="a partition under `partitions`")
    trace: str = option(doc="a trace under `traces`")
    algorithms: list[str] = option(doc="names under `algorithms`, each once",
                                   check=must("a non-empty list of distinct names", lambda v: _distinct(v, str)))
    seeds: list[int] | None = option(None, "this experiment's seeds, distinct integers >= 0 (e.g. one seed for a cheap "
                                     "sweep); null: the top-level seeds",
                                     check=must("null or a non-empty list of distinct integers >= 0",
                                                lambda v: _distinct(v, int) and min(v) >= 0))
    training: dict = option(doc="see training")

    def __post_init__(self):
        check_fields(self)


@dataclass(frozen=True, kw_only=True)
class ExecutionOptions:
    """`execution`: where and how jobs run; changing these reruns nothing."""

    train_threads: int = option(1, "CPU threads per training job", check=check_int)
    device: str = option("auto", "auto (CUDA when present), cpu, cuda, cuda:N",
                         check=must("auto, cpu, cuda or cuda:N",
                                    lambda v: isinstance(v, str) and DEVICE.fullmatch(v) is not None))
    batched: str | bool = option("auto", "vmap over clients (auto: on CUDA, and on the CPU for the models and batch "
                                         "sizes where it was measured faster: fedavail.engine.backend)",
                                 choices=("auto", True, False))
    checkpoint_every: int = option(50, "rounds between checkpoints of a training run", check=check_int)
    log_every: int = option(10, "rounds between progress lines in a run's log", check=check_int)
    seeds_per_job: int | str = option(1, "1: one training job per run; all: one job trains every run of a dataset "
                                      "with the same training and algorithm settings (all seeds of an experiment x "
                                      "algorithm, and the runs of experiments that differ only in partition or "
                                      "trace) in one process, their clients batched together; the same outputs "
                                      "either way", choices=(1, "all"),
                                      check=must("1 or all", lambda v: not is_bool(v)))
    seconds_per_round: float = option(10, "cluster time limits: a training job asks for 10 min + rounds × "
                                      "seconds_per_round (times the attempt, so a retry gets more)",
                                      check=check_positive)

    def __post_init__(self):
        check_fields(self)


def _distinct(values, kind: type) -> bool:
    """`values` is a non-empty list of distinct `kind`s (a bool is no integer)."""
    return (isinstance(values, list) and bool(values) and len(values) == len(set(map(repr, values)))
            and all(isinstance(value, kind) and not isinstance(value, bool) for value in values))
