"""An experiment's training block and the execution block, torch-free, each default written here only. Local
optimisation (`training.local`) is fedavail.plan.local."""

import re
from dataclasses import dataclass

from fedavail.availability.trace_models import MAX_ROUNDS
from fedavail.options import check_fields, is_number, option
from fedavail.plan.names import MODEL_NAMES

DEVICE = re.compile(r"auto|cpu|cuda(:[0-9]+)?")


@dataclass(frozen=True, kw_only=True)
class AugmentationOptions:
    """Image augmentation of every local minibatch."""

    crop_padding: int = option(0, "random crop after zero padding by this many pixels; 0: no crop")
    horizontal_flip: bool = option(False, "flip each image horizontally with probability 1/2")
    draw: str = option("per_image", "per_image: each image its own crop offset and flip; per_batch: one draw for the "
                       "whole minibatch (torchvision's transforms called on a batch tensor, as the FedAWE code does)",
                       choices=("per_image", "per_batch"))

    @property
    def active(self) -> bool:
        return self.crop_padding > 0 or self.horizontal_flip

    def __post_init__(self):
        check_fields(self, "training.augmentation")
        _integers(self, 0, "crop_padding")
        if not isinstance(self.horizontal_flip, bool):
            raise ValueError(f"horizontal_flip: must be true or false, got {self.horizontal_flip!r}")


@dataclass(frozen=True, kw_only=True)
class TrainingOptions:
    """`experiments.<name>.training`: what every run of the experiment trains."""

    model: str = option(doc="the model, by name", choices=tuple(MODEL_NAMES))
    rounds: int = option(doc=f"communication rounds R, at most {MAX_ROUNDS:,}")
    local: dict = option({}, "local optimisation, see training.local")
    eval_every: int = option(10, "evaluate the global model every this many rounds")
    last_n: int = option(20, "final rounds evaluated every round and averaged in the tables")
    train_eval_samples: int = option(2000, "training samples the training loss and accuracy are measured on")
    augmentation: dict = option({}, "see training.augmentation")

    def __post_init__(self):
        if self.model not in MODEL_NAMES:
            raise ValueError(f"model: unknown model {self.model!r}; known: {MODEL_NAMES}")
        _integers(self, 1, "rounds", "eval_every", "last_n", "train_eval_samples")
        if self.rounds > MAX_ROUNDS:
            raise ValueError(f"rounds: {self.rounds:,} rounds, more than MAX_ROUNDS = {MAX_ROUNDS:,}; lower it")
        if self.last_n > self.rounds:
            raise ValueError(f"last_n: {self.last_n} exceeds rounds {self.rounds}")


@dataclass(frozen=True, kw_only=True)
class ExperimentOptions:
    """`experiments.<name>`: every listed algorithm runs once per seed on the same partition and trace."""

    partition: str = option(doc="a partition under `partitions`")
    trace: str = option(doc="a trace under `traces`")
    algorithms: list[str] = option(doc="names under `algorithms`, each once")
    seeds: list[int] | None = option(None, "this experiment's seeds, distinct integers >= 0 (e.g. one seed for a cheap "
                                     "sweep); null: the top-level seeds")
    training: dict = option(doc="see training")

    def __post_init__(self):
        if not _distinct(self.algorithms, str):
            raise ValueError(f"algorithms: must be a non-empty list of distinct names, got {self.algorithms!r}")
        if self.seeds is not None and not (_distinct(self.seeds, int) and min(self.seeds) >= 0):
            raise ValueError(f"seeds: must be null or a non-empty list of distinct integers >= 0, got {self.seeds!r}")


@dataclass(frozen=True, kw_only=True)
class ExecutionOptions:
    """`execution`: where and how jobs run; changing these reruns nothing."""

    train_threads: int = option(1, "CPU threads per training job")
    device: str = option("auto", "auto (CUDA when present), cpu, cuda, cuda:N")
    batched: str | bool = option("auto", "vmap over clients (auto: on CUDA, and on the CPU for the models and batch "
                                         "sizes where it was measured faster: fedavail.engine.backend)",
                                 choices=("auto", True, False))
    checkpoint_every: int = option(50, "rounds between checkpoints of a training run")
    log_every: int = option(10, "rounds between progress lines in a run's log")
    seeds_per_job: int | str = option(1, "1: one training job per run; all: one job trains every run of a dataset "
                                      "with the same training and algorithm settings (all seeds of an experiment x "
                                      "algorithm, and the runs of experiments that differ only in partition or "
                                      "trace) in one process, their clients batched together; the same outputs "
                                      "either way", choices=(1, "all"))
    seconds_per_round: float = option(10, "cluster time limits: a training job asks for 10 min + rounds × "
                                      "seconds_per_round (times the attempt, so a retry gets more)")

    def __post_init__(self):
        if self.seeds_per_job not in (1, "all") or isinstance(self.seeds_per_job, bool):
            raise ValueError(f"seeds_per_job: must be 1 or all, got {self.seeds_per_job!r}")
        if self.batched not in ("auto", True, False):
            raise ValueError(f"batched: must be auto, true or false, got {self.batched!r}")
        _integers(self, 1, "train_threads", "checkpoint_every", "log_every")
        if not isinstance(self.device, str) or not DEVICE.fullmatch(self.device):
            raise ValueError(f"device: {self.device!r} is not auto, cpu, cuda or cuda:N")
        if not is_number(self.seconds_per_round) or self.seconds_per_round <= 0:
            raise ValueError(f"seconds_per_round: must be > 0, got {self.seconds_per_round!r}")


def _integers(options, minimum: int, *keys: str) -> None:
    for key in keys:
        value = getattr(options, key)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{key}: must be an integer >= {minimum}, got {value!r}")


def _distinct(values, kind: type) -> bool:
    """`values` is a non-empty list of distinct `kind`s (a bool is no integer)."""
    return (isinstance(values, list) and bool(values) and len(values) == len(set(map(repr, values)))
            and all(isinstance(value, kind) and not isinstance(value, bool) for value in values))
