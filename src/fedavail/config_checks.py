"""Config checks beyond the schema and the cross-references of fedavail.config.check: names that are safe in paths
and shell commands, finite numbers, and the settings that are valid alone but cannot run together (a budget larger
than the clients, a class mix the partition does not store, known p_i^t from a trace without them, ...). All run
before any job starts, and every error names the key."""

import math
import re

from fedavail.plan.algorithms import resolve_algorithm
from fedavail.plan.algorithms.base import AlgorithmOptions
from fedavail.plan.config import ConfigError, check_name_length, shorten, trace_spec, without
from fedavail.plan.local import LocalOptions
from fedavail.plan.partitions import SCHEMES_DRAWING_NU
from fedavail.plan.traces import check_trace_for, records_prob

# A name becomes a folder (results/runs/<experiment>/<algorithm>/...) and part of shell commands: letters, digits and
# . _ + - only, starting with a letter or digit (so never "." or ".." and never a shell metacharacter).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
NAMED_SECTIONS = ("experiments", "algorithms", "partitions", "traces", "reports", "datasets")

# Training samples of each image dataset (text datasets depend on their options and use the natural scheme).
TRAIN_SAMPLES = {"fashion_mnist": 60000, "cifar10": 50000, "svhn": 73257, "cinic10": 90000, "mnist5k": 4000,
                 "digits": 1438}


def check_names(config: dict) -> None:
    for section in NAMED_SECTIONS:
        for name in config.get(section) or {}:
            if not isinstance(name, str) or not NAME.fullmatch(name):
                raise ConfigError(f"{section}.{shorten(name)}: a name must match {NAME.pattern} (letters, digits, '.', "
                                  f"'_', '+', '-'; starting with a letter or digit): names become folders and shell "
                                  f"words")
            check_name_length(section, name)


def check_finite(value, key: str = "config") -> None:
    """Reject NaN and ±inf anywhere (YAML's .nan / .inf): no setting means "not a number"."""
    if isinstance(value, dict):
        for name, item in value.items():
            check_finite(item, f"{key}.{name}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_finite(item, f"{key}[{index}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key.removeprefix('config.')}: {value} is not a finite number")


def check_combinations(config: dict) -> None:
    for name, partition in config["partitions"].items():
        samples = TRAIN_SAMPLES.get(partition["dataset"])
        clients = partition.get("num_clients")
        if samples is not None and clients is not None and clients > samples:
            raise ConfigError(f"partitions.{name}.num_clients: {clients} clients, but {partition['dataset']} has "
                              f"only {samples} training samples")
    for name in config["traces"]:
        _check_trace_combinations(config, name)
    options = {name: resolve_algorithm(spec["algorithm"], without(spec, "algorithm", "lr"))
               for name, spec in config["algorithms"].items()}
    for name, experiment in config["experiments"].items():
        _check_batch_size(config, name, experiment)
        trace = trace_spec(config, experiment["trace"])
        for algorithm in experiment["algorithms"]:
            _check_algorithm_on_trace(name, experiment["trace"], trace, algorithm, options[algorithm])


def _check_batch_size(config: dict, name: str, experiment: dict) -> None:
    dataset = config["partitions"][experiment["partition"]]["dataset"]
    samples = TRAIN_SAMPLES.get(dataset)
    batch_size = (experiment["training"].get("local") or {}).get("batch_size", LocalOptions.batch_size)
    if samples is not None and batch_size > samples:
        raise ConfigError(f"experiments.{name}.training.local.batch_size: {batch_size} samples per minibatch, but "
                          f"{dataset} has only {samples} training samples; lower it")


def _check_trace_combinations(config: dict, name: str) -> None:
    spec = trace_spec(config, name)
    if spec["num_clients"] is not None:
        try:
            check_trace_for(spec, spec["num_clients"])
        except ValueError as error:
            raise ConfigError(f"traces.{name}: {error}") from error
    if spec["model"] == "fedswe" and spec["class_mix"] == "nu":
        scheme = config["partitions"][spec["partition"]]["scheme"]
        if scheme not in SCHEMES_DRAWING_NU:
            raise ConfigError(f"traces.{name}.class_mix: 'nu' (the default) needs a partition that draws ν_i "
                              f"({', '.join(SCHEMES_DRAWING_NU)}); partition {spec['partition']!r} uses "
                              f"{scheme!r}: set class_mix: empirical")


def _check_algorithm_on_trace(experiment: str, trace_name: str, trace: dict, algorithm: str,
                              options: AlgorithmOptions) -> None:
    clients = trace.get("num_clients")
    budget = getattr(options, "clients_per_round", None)
    if budget is not None and clients is not None and budget > clients:
        raise ConfigError(f"algorithms.{algorithm}.clients_per_round: {budget} exceeds the {clients} clients "
                          f"of experiment {experiment!r}")
    if options.needs_prob() and not records_prob(trace):
        raise ConfigError(f"algorithms.{algorithm}.weighting: 'known' needs p_i^t, which trace {trace_name!r} "
                          f"(model {trace['model']!r}, distribution {trace.get('distribution')!r}) does not record "
                          f"(experiment {experiment!r})")
