"""A whole config, checked entry by entry against the typed settings of the plan layer, and the settings each job
depends on. Every error names the key path (`partitions.p.alpha: ...`)."""

from dataclasses import dataclass

from fedavail.plan.algorithms import resolve_algorithm
from fedavail.plan.experiments import Augmentation, Execution, Experiment, Training
from fedavail.plan.local import resolve_local
from fedavail.plan.options import key_table, required
from fedavail.plan.partitions import full_partition_spec, resolve_partition
from fedavail.plan.traces import TRACE_MODELS, full_trace_spec

BUNDLED_DATASETS = ("mnist5k", "digits", "shakespeare")
PAPER_DATASETS = ("fashion_mnist", "cifar10", "svhn", "cinic10", "shakespeare_leaf", "shakespeare_leaf_json")
DATASETS = BUNDLED_DATASETS + PAPER_DATASETS


# Characters of a config value an error message echoes, and of a whole message (a value of a megabyte, or a long
# chain of values in a message built from a plan-layer error, would otherwise flood the terminal).
MAX_ECHO_LENGTH = 200
MAX_MESSAGE_LENGTH = 2000
# Names become folders and file names (results/runs/<experiment>/<algorithm>/..., well below the 255 bytes of one).
MAX_NAME_LENGTH = 100


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


def check_name_length(section: str, name: str) -> None:
    if len(name) > MAX_NAME_LENGTH:
        raise ConfigError(f"{section}.{shorten(name, 60)}: a name of {len(name)} characters, more than "
                          f"MAX_NAME_LENGTH = {MAX_NAME_LENGTH} (names become folders and file names); shorten it")


def wrap(key: str, validate, *args):
    """validate(*args), its ValueError or TypeError re-raised as a ConfigError under `key`."""
    try:
        return validate(*args)
    except (ValueError, TypeError) as error:
        raise ConfigError(f"{key}: {error}") from error


def without(spec: dict, *keys: str) -> dict:
    return {k: v for k, v in spec.items() if k not in keys}


def check_entries(config: dict) -> None:
    """Raise ConfigError naming the first key of a partition, trace, algorithm, experiment or the execution block
    that cannot run, or a cross-reference that names nothing."""
    _typed(Execution, config.get("execution", {}), "execution")
    for name, spec in config["partitions"].items():
        if spec.get("dataset") not in DATASETS:
            raise ConfigError(f"partitions.{name}.dataset: {shorten(spec.get('dataset'))} is not one of {DATASETS}")
        wrap(f"partitions.{name}", resolve_partition, without(spec, "dataset"))
    for name in config["traces"]:
        _check_trace(config, name)
    for name, spec in config["algorithms"].items():
        wrap(f"algorithms.{name}", resolve_algorithm, spec["algorithm"], without(spec, "algorithm", "lr"))
    for name in config["experiments"]:
        _check_experiment(config, name)


def _check_trace(config: dict, name: str) -> None:
    key, spec = f"traces.{name}", config["traces"][name]
    wrap(key, trace_spec, config, name)
    if TRACE_MODELS[spec["model"]].NEEDS_PARTITION:
        if spec.get("partition") not in config["partitions"]:
            raise ConfigError(f"{key}.partition: model {spec['model']!r} needs a partition defined under "
                              f"'partitions' (got {shorten(spec.get('partition'))})")
    elif "num_clients" not in spec and spec.get("partition") not in config["partitions"]:
        raise ConfigError(f"{key}: give num_clients, or a partition defined under 'partitions'")


def _check_experiment(config: dict, name: str) -> None:
    key, experiment = f"experiments.{name}", config["experiments"][name]
    _typed(Experiment, experiment, key)
    for ref, table in (("partition", "partitions"), ("trace", "traces")):
        if experiment[ref] not in config[table]:
            raise ConfigError(f"{key}.{ref}: {shorten(experiment[ref])} is not defined under '{table}'")
    for algorithm in experiment["algorithms"]:
        if algorithm not in config["algorithms"]:
            raise ConfigError(f"{key}.algorithms: {shorten(algorithm)} is not defined under 'algorithms'")
    training = _typed(Training, experiment["training"], f"{key}.training")
    _typed(Augmentation, training.augmentation, f"{key}.training.augmentation")
    for algorithm in experiment["algorithms"]:
        try:
            local_spec(config, name, algorithm)
        except ValueError as error:
            raise ConfigError(f"{error} (algorithm {algorithm!r})") from error
    trace = config["traces"][experiment["trace"]]
    if trace["rounds"] < training.rounds:
        raise ConfigError(f"{key}.training.rounds: {training.rounds} rounds, but trace {experiment['trace']!r} has "
                          f"only {trace['rounds']}")
    trace_clients = trace_spec(config, experiment["trace"])["num_clients"]
    partition_clients = config["partitions"][experiment["partition"]].get("num_clients")
    if partition_clients is not None and trace_clients != partition_clients:
        raise ConfigError(f"{key}: trace {experiment['trace']!r} has {trace_clients} clients, partition "
                          f"{experiment['partition']!r} has {partition_clients}")


def _typed(cls, values: dict, where: str):
    """`values` as a `cls`, keys and values checked; ConfigError naming the key under `where`."""
    allowed = key_table(cls)
    unknown = sorted(set(values) - set(allowed))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (allowed: {sorted(allowed)})")
    missing = [name for name in required(cls) if name not in values]
    if missing:
        raise ConfigError(f"{where}.{missing[0]}: missing")
    try:
        return cls(**values)
    except ValueError as error:
        raise ConfigError(f"{where}.{error}") from error


def partition_spec(config: dict, name: str) -> dict:
    """What a partition job depends on: its dataset and its scheme's settings, every default filled in (a changed
    default is a changed job)."""
    spec = config["partitions"][name]
    return {"dataset": spec["dataset"], **full_partition_spec(without(spec, "dataset"))}


def trace_spec(config: dict, name: str) -> dict:
    """The trace's settings, num_clients taken from its partition when not given, every default filled in."""
    spec = dict(config["traces"][name])
    if "num_clients" not in spec and spec.get("partition") in config["partitions"]:
        spec["num_clients"] = config["partitions"][spec["partition"]].get("num_clients")
    return full_trace_spec(spec)


def algorithm_spec(config: dict, name: str) -> dict:
    """Algorithm entry `name` as a job receives it: `algorithm` and every hyperparameter, defaults filled in (its
    `lr` belongs to the local optimisation block)."""
    entry = without(config["algorithms"][name], "lr")
    options = resolve_algorithm(entry["algorithm"], without(entry, "algorithm"))
    return {"algorithm": entry["algorithm"], **{key: getattr(options, key) for key in options.hyperparameters()}}


def trace_needs_partition(config: dict, name: str) -> bool:
    return TRACE_MODELS[config["traces"][name]["model"]].NEEDS_PARTITION


def dataset_spec(config: dict, name: str) -> dict:
    return dict(config.get("datasets", {}).get(name, {}))


@dataclass(frozen=True)
class Run:
    experiment: str
    algorithm: str
    seed: int

    @property
    def directory(self) -> str:
        return f"results/runs/{self.experiment}/{self.algorithm}/seed{self.seed}"


def experiment_seeds(config: dict, experiment: str) -> list[int]:
    """The experiment's own seeds (e.g. one seed for a cheap sweep), else the config's."""
    return config["experiments"][experiment].get("seeds", config["seeds"])


def runs(config: dict, experiment: str | None = None) -> list[Run]:
    names = [experiment] if experiment else list(config["experiments"])
    return [Run(e, a, s) for e in names for a in config["experiments"][e]["algorithms"]
            for s in experiment_seeds(config, e)]


def local_spec(config: dict, experiment: str, algorithm: str) -> dict:
    """The run's local optimisation settings, resolved: the experiment's `training.local` with the algorithm's lr."""
    training = config["experiments"][experiment]["training"]
    lr = config["algorithms"][algorithm].get("lr")
    return resolve_local(training.get("local"), lr, f"experiments.{experiment}.training.local").as_dict()


def run_spec(config: dict, experiment: str, algorithm: str, seed: int) -> dict:
    """Exactly what one training job depends on: its experiment's training settings with the local optimisation
    block resolved for this algorithm, its algorithm's hyperparameters, its seed."""
    training = {**config["experiments"][experiment]["training"], "local": local_spec(config, experiment, algorithm)}
    return {"experiment": experiment, "algorithm_id": algorithm, "seed": int(seed), "training": training,
            "algorithm": algorithm_spec(config, algorithm)}
