"""What the schema cannot say about a config: cross-references and per-algorithm hyperparameters; and the expansion
of experiments into jobs. Both the Snakefile and the tests use this module, so a config is checked the same way
everywhere, before any job starts."""

import json
from dataclasses import dataclass
from pathlib import Path

from fedavail.algorithms import build_algorithm
from fedavail.models import MODEL_NAMES
from fedavail.plan.local import resolve_local

BUNDLED_DATASETS = ("mnist5k", "digits", "shakespeare")
PAPER_DATASETS = ("fashion_mnist", "cifar10", "svhn", "cinic10", "shakespeare_leaf", "shakespeare_leaf_json")
TRACE_MODELS_NEEDING_PARTITION = ("fedswe",)


class ConfigError(ValueError):
    """A config value that cannot run; the message names the key."""


def check(config: dict) -> None:
    """Raise ConfigError naming the first key whose value cannot run."""
    from fedavail.availability.traces import validate_trace_spec
    from fedavail.data.partition import validate_partition_spec
    from fedavail.config_checks import check_combinations, check_finite, check_names

    check_names(config)
    check_finite(config)

    for name, spec in config["partitions"].items():
        _wrap(f"partitions.{name}", validate_partition_spec, _without(spec, "dataset"))
    for name, spec in config["traces"].items():
        key = f"traces.{name}"
        if spec["model"] in TRACE_MODELS_NEEDING_PARTITION:
            if spec.get("partition") not in config["partitions"]:
                raise ConfigError(f"{key}.partition: model {spec['model']!r} needs a partition defined under "
                                  f"'partitions' (got {spec.get('partition')!r})")
        elif "num_clients" not in spec and spec.get("partition") not in config["partitions"]:
            raise ConfigError(f"{key}: give num_clients, or a partition defined under 'partitions'")
        _wrap(key, validate_trace_spec, trace_spec(config, name))
    for name, spec in config["algorithms"].items():
        hyperparameters = _without(spec, "algorithm", "lr")
        _wrap(f"algorithms.{name}", build_algorithm, spec["algorithm"], hyperparameters)
    for name, experiment in config["experiments"].items():
        key = f"experiments.{name}"
        for ref, table in (("partition", "partitions"), ("trace", "traces")):
            if experiment[ref] not in config[table]:
                raise ConfigError(f"{key}.{ref}: {experiment[ref]!r} is not defined under '{table}'")
        for algorithm in experiment["algorithms"]:
            if algorithm not in config["algorithms"]:
                raise ConfigError(f"{key}.algorithms: {algorithm!r} is not defined under 'algorithms'")
        training = experiment["training"]
        for algorithm in experiment["algorithms"]:
            try:
                local_spec(config, name, algorithm)
            except ValueError as error:
                raise ConfigError(f"{error} (algorithm {algorithm!r})") from error
        if training["model"] not in MODEL_NAMES:
            raise ConfigError(f"{key}.training.model: unknown model {training['model']!r}; known: {MODEL_NAMES}")
        trace = config["traces"][experiment["trace"]]
        if trace["rounds"] < training["rounds"]:
            raise ConfigError(f"{key}.training.rounds: {training['rounds']} rounds, but trace "
                              f"{experiment['trace']!r} has only {trace['rounds']}")
        trace_clients = trace_spec(config, experiment["trace"])["num_clients"]
        partition_clients = config["partitions"][experiment["partition"]].get("num_clients")
        if partition_clients is not None and trace_clients != partition_clients:
            raise ConfigError(f"{key}: trace {experiment['trace']!r} has {trace_clients} clients, partition "
                              f"{experiment['partition']!r} has {partition_clients}")
        if training["last_n"] > training["rounds"]:
            raise ConfigError(f"{key}.training.last_n: {training['last_n']} exceeds rounds {training['rounds']}")
    check_combinations(config)
    check_reports(config)


def check_reports(config: dict) -> None:
    """The `reports:` section (fedavail.plan.reports): kinds, keys and the experiments they read."""
    from fedavail.plan.reports import parse_reports

    try:
        parse_reports(config)
    except (ValueError, TypeError) as error:
        raise ConfigError(str(error)) from error


def _wrap(key: str, validate, *args) -> None:
    try:
        validate(*args)
    except (ValueError, TypeError) as error:
        raise ConfigError(f"{key}: {error}") from error


def _without(spec: dict, *keys: str) -> dict:
    return {k: v for k, v in spec.items() if k not in keys}


def partition_spec(config: dict, name: str) -> dict:
    return dict(config["partitions"][name])


def trace_spec(config: dict, name: str) -> dict:
    """The trace's own settings, with num_clients taken from its partition when not given."""
    spec = dict(config["traces"][name])
    if "num_clients" not in spec and spec.get("partition") in config["partitions"]:
        spec["num_clients"] = config["partitions"][spec["partition"]].get("num_clients")
    return spec


def trace_needs_partition(config: dict, name: str) -> bool:
    return config["traces"][name]["model"] in TRACE_MODELS_NEEDING_PARTITION


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
            "algorithm": _without(config["algorithms"][algorithm], "lr")}


def report_spec(config: dict, experiment: str) -> dict:
    """Exactly what the per-experiment table and figure depend on (fedavail.plan.reports.experiment_job)."""
    from fedavail.plan.reports import experiment_job

    return experiment_job(config, experiment)


def report_spec_of(config: dict, name: str) -> dict:
    """Exactly what cross-experiment report `name` depends on (fedavail.plan.reports.report_job)."""
    from fedavail.plan.reports import report_job

    return report_job(config, name)


def as_json(obj) -> str:
    return json.dumps(obj, sort_keys=True)


def training_sources() -> list[str]:
    """Source files a training job depends on: editing them reruns training."""
    from fedavail.train import TRAINING_SOURCES

    root = Path(__file__).parent
    files = []
    for entry in TRAINING_SOURCES:
        path = root / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return [str(f) for f in files]
