"""The resolvers of a config's entries into the specs its jobs depend on (every default filled in, so a changed
default is a changed job; fedavail.plan.plan calls each once per entry), a run, the datasets a config may name, and
ConfigError, the error every config check raises (fedavail.plan.checks)."""

import json
from dataclasses import asdict, dataclass

from fedavail.partitions.schemes import resolve_partition
from fedavail.plan.local import resolve_local
from fedavail.plan.paths import RUN_DIR, path

BUNDLED_DATASETS = ("mnist5k", "digits", "shakespeare")
PAPER_DATASETS = ("fashion_mnist", "cifar10", "svhn", "cinic10", "shakespeare_leaf", "shakespeare_leaf_json")
DATASETS = BUNDLED_DATASETS + PAPER_DATASETS


# Characters of a config value an error message echoes, and of a whole message (a value of a megabyte, or a long
# chain of values in a message built from a plan-layer error, would otherwise flood the terminal).
MAX_ECHO_LENGTH = 200
MAX_MESSAGE_LENGTH = 2000


def cut(text: str, limit: int) -> str:
    """`text`, cut after `limit` characters with a note of its full length."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def shorten(value, limit: int = MAX_ECHO_LENGTH) -> str:
    """repr(value) as an error message echoes it: cut after `limit` characters."""
    return cut(repr(value), limit)


class ConfigError(ValueError):
    """A config value that cannot run; the message names the key (and is cut after MAX_MESSAGE_LENGTH characters)."""

    def __init__(self, message: str):
        super().__init__(cut(message, MAX_MESSAGE_LENGTH))


def without(spec: dict, *keys: str) -> dict:
    return {k: v for k, v in spec.items() if k not in keys}


def merge(base: dict, update: dict) -> dict:
    """Nested mappings merged key by key, later values winning (how Snakemake combines several config files)."""
    return {**base, **{key: merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict)
                       else value for key, value in update.items()}}


def as_json(obj) -> str:
    """A job's spec as its command line passes it: keys sorted, so the same settings are the same parameter."""
    return json.dumps(obj, sort_keys=True)


def partition_spec(config: dict, name: str) -> dict:
    """What a partition job depends on: its dataset and its scheme's settings, every default filled in."""
    spec = config["partitions"][name]
    return {"dataset": spec["dataset"], "scheme": spec["scheme"], **asdict(resolve_partition(without(spec, "dataset")))}


def stated_trace(config: dict, name: str) -> dict:
    """The trace's settings as the config states them, num_clients taken from its partition when not given."""
    trace = dict(config["traces"][name])
    trace.setdefault("num_clients", config["partitions"].get(trace.get("partition"), {}).get("num_clients"))
    return trace


@dataclass(frozen=True)
class Run:
    experiment: str
    algorithm: str
    seed: int

    @property
    def directory(self) -> str:
        return path(RUN_DIR, experiment=self.experiment, algorithm=self.algorithm, seed=self.seed)


def experiment_seeds(config: dict, experiment: str) -> list[int]:
    """The experiment's own seeds (e.g. one seed for a cheap sweep), else the config's."""
    return config["experiments"][experiment].get("seeds", config["seeds"])


def local_spec(config: dict, experiment: str, algorithm: str) -> dict:
    """The run's local optimisation settings, resolved: the experiment's `training.local` with the algorithm's lr."""
    training = config["experiments"][experiment]["training"]
    lr = config["algorithms"][algorithm].get("lr")
    return resolve_local(training.get("local"), lr, f"experiments.{experiment}.training.local").as_dict()
