"""Every check of a config beyond its JSON schema, run by fedavail.plan.plan.build_plan before any job starts; every
error names the key path (`partitions.p.alpha: ...`)."""

import math
import re
from pathlib import Path

from fedavail.availability.trace_models import TRACE_MODELS, TraceModel, check_trace_for, resolve_trace, trace_spec
from fedavail.options import check_keys, key_table
from fedavail.partitions.schemes import SCHEMES_DRAWING_NU
from fedavail.plan.algorithms import resolve_algorithm
from fedavail.plan.algorithms.base import AlgorithmOptions
from fedavail.plan.errors import MAX_MESSAGE_LENGTH, ConfigError, cut, shorten
from fedavail.plan.experiments import AugmentationOptions, ExecutionOptions, ExperimentOptions, TrainingOptions
from fedavail.plan.local import LocalOptions
from fedavail.plan.mappings import without
from fedavail.plan.names import DATASETS
from fedavail.plan.reports import Report, parse_reports
from fedavail.plan.specs import local_spec, partition_spec, stated_trace

# A name becomes a folder (results/runs/<experiment>/<algorithm>/...), file names and part of shell commands: letters,
# digits and . _ + - only, starting with a letter or digit (so never "." or ".." and never a shell metacharacter), and
# well below the 255 bytes of a file name.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
MAX_NAME_LENGTH = 100
NAMED_SECTIONS = ("experiments", "algorithms", "partitions", "traces", "reports", "datasets")

# Training samples of each image dataset (text datasets depend on their options and use the natural scheme).
TRAIN_SAMPLES = {"fashion_mnist": 60000, "cifar10": 50000, "svhn": 73257, "cinic10": 90000, "mnist5k": 4000,
                 "digits": 1438}


def schema_problem(error) -> str:
    """A JSON-schema validation error as `<key>: <problem>`, the offending value shortened (the validator's own text
    repeats it, whatever its size, and its part of the schema)."""
    key = ".".join(str(part) for part in error.absolute_path) or "config"
    return cut(f"{key}: {error.message.replace(repr(error.instance), shorten(error.instance))}", MAX_MESSAGE_LENGTH)


def check_names(config: dict) -> None:
    for section in NAMED_SECTIONS:
        for name in config.get(section) or {}:
            if not isinstance(name, str) or not NAME.fullmatch(name):
                raise ConfigError(f"{section}.{shorten(name)}: a name must match {NAME.pattern} (letters, digits, '.', "
                                  f"'_', '+', '-'; starting with a letter or digit): names become folders and shell "
                                  f"words")
            check_name_length(section, name)


def check_name_length(section: str, name: str) -> None:
    if len(name) > MAX_NAME_LENGTH:
        raise ConfigError(f"{section}.{shorten(name, 60)}: a name of {len(name)} characters, more than "
                          f"MAX_NAME_LENGTH = {MAX_NAME_LENGTH} (names become folders and file names); shorten it")


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


def resolve_entries(config: dict) -> tuple:
    """Every entry resolved once, every default filled in: the execution options, each partition's job spec, each
    trace's model (its job spec: models.trace_spec), each algorithm's options, each experiment's training.local by
    algorithm (local_spec). ConfigError names the first key of an entry (or the execution block) that cannot run, or
    of a cross-reference that names nothing."""
    execution = _typed(ExecutionOptions, config.get("execution", {}), "execution")
    partitions = {}
    for name, spec in config["partitions"].items():
        if spec.get("dataset") not in DATASETS:
            raise ConfigError(f"partitions.{name}.dataset: {shorten(spec.get('dataset'))} is not one of {DATASETS}")
        partitions[name] = _wrap(f"partitions.{name}", partition_spec, config, name)
    traces = {name: _resolve_trace(config, name) for name in config["traces"]}
    algorithms = {name: _wrap(f"algorithms.{name}", resolve_algorithm, spec["algorithm"],
                              without(spec, "algorithm", "lr", "label"))
                  for name, spec in config["algorithms"].items()}
    local = {name: _resolve_experiment(config, name, traces) for name in config["experiments"]}
    return execution, partitions, traces, algorithms, local


def _wrap(key: str, validate, *args):
    try:
        return validate(*args)
    except (ValueError, TypeError) as error:
        raise ConfigError(f"{key}: {error}") from error


def _resolve_trace(config: dict, name: str) -> TraceModel:
    key, spec = f"traces.{name}", config["traces"][name]
    model = _wrap(key, resolve_trace, stated_trace(config, name))
    if TRACE_MODELS[spec["model"]].NEEDS_PARTITION:
        if spec.get("partition") not in config["partitions"]:
            raise ConfigError(f"{key}.partition: model {spec['model']!r} needs a partition defined under "
                              f"'partitions' (got {shorten(spec.get('partition'))})")
    elif "num_clients" not in spec and spec.get("partition") not in config["partitions"]:
        raise ConfigError(f"{key}: give num_clients, or a partition defined under 'partitions'")
    for record in TRACE_MODELS[spec["model"]].record_files(trace_spec(model)):
        if not Path(record).is_file():
            raise ConfigError(f"{key}: no device record at {record} (relative paths are from the workflow's folder; "
                              "docs/recorded-availability.md says where records go)")
    return model


def _resolve_experiment(config: dict, name: str, traces: dict[str, TraceModel]) -> dict[str, dict]:
    """The experiment checked; each of its algorithms' training.local block, resolved."""
    key, experiment = f"experiments.{name}", config["experiments"][name]
    _typed(ExperimentOptions, experiment, key)
    for ref, table in (("partition", "partitions"), ("trace", "traces")):
        if experiment[ref] not in config[table]:
            raise ConfigError(f"{key}.{ref}: {shorten(experiment[ref])} is not defined under '{table}'")
    for algorithm in experiment["algorithms"]:
        if algorithm not in config["algorithms"]:
            raise ConfigError(f"{key}.algorithms: {shorten(algorithm)} is not defined under 'algorithms'")
    training = _typed(TrainingOptions, experiment["training"], f"{key}.training")
    _typed(AugmentationOptions, training.augmentation, f"{key}.training.augmentation")
    local = {}
    for algorithm in experiment["algorithms"]:
        try:
            local[algorithm] = local_spec(config, name, algorithm)
        except ValueError as error:
            raise ConfigError(f"{error} (algorithm {algorithm!r})") from error
    trace = config["traces"][experiment["trace"]]
    if trace["rounds"] < training.rounds:
        raise ConfigError(f"{key}.training.rounds: {training.rounds} rounds, but trace {experiment['trace']!r} has "
                          f"only {trace['rounds']}")
    trace_clients = traces[experiment["trace"]].num_clients
    partition_clients = config["partitions"][experiment["partition"]].get("num_clients")
    if partition_clients is not None and trace_clients != partition_clients:
        raise ConfigError(f"{key}: trace {experiment['trace']!r} has {trace_clients} clients, partition "
                          f"{experiment['partition']!r} has {partition_clients}")
    return local


def _typed(cls, values: dict, where: str):
    """`values` as a `cls`, keys and values checked; ConfigError naming the key under `where`."""
    try:
        check_keys(values, key_table(cls))
        return cls(**values)
    except ValueError as error:
        raise ConfigError(f"{where}.{error}") from error


def check_combinations(config: dict, traces: dict[str, TraceModel], algorithms: dict[str, AlgorithmOptions]) -> None:
    for name, partition in config["partitions"].items():
        samples = TRAIN_SAMPLES.get(partition["dataset"])
        clients = partition.get("num_clients")
        if samples is not None and clients is not None and clients > samples:
            raise ConfigError(f"partitions.{name}.num_clients: {clients} clients, but {partition['dataset']} has "
                              f"only {samples} training samples")
    for name, model in traces.items():
        if model.num_clients is not None:
            _wrap(f"traces.{name}", check_trace_for, model, model.num_clients)
        if getattr(model, "class_mix", None) == "nu":
            scheme = config["partitions"][model.partition]["scheme"]
            if scheme not in SCHEMES_DRAWING_NU:
                raise ConfigError(f"traces.{name}.class_mix: 'nu' (the default) needs a partition that draws ν_i "
                                  f"({', '.join(SCHEMES_DRAWING_NU)}); partition {model.partition!r} uses "
                                  f"{scheme!r}: set class_mix: empirical")
    for name, experiment in config["experiments"].items():
        dataset = config["partitions"][experiment["partition"]]["dataset"]
        samples = TRAIN_SAMPLES.get(dataset)
        batch_size = (experiment["training"].get("local") or {}).get("batch_size", LocalOptions.batch_size)
        if samples is not None and batch_size > samples:
            raise ConfigError(f"experiments.{name}.training.local.batch_size: {batch_size} samples per minibatch, "
                              f"but {dataset} has only {samples} training samples; lower it")
        trace = traces[experiment["trace"]]
        for algorithm in experiment["algorithms"]:
            budget, clients = getattr(algorithms[algorithm], "clients_per_round", None), trace.num_clients
            if budget is not None and clients is not None and budget > clients:
                raise ConfigError(f"algorithms.{algorithm}.clients_per_round: {budget} exceeds the {clients} clients "
                                  f"of experiment {name!r}")
            if algorithms[algorithm].needs_prob() and not trace.stores_prob():
                spec = trace_spec(trace)
                raise ConfigError(f"algorithms.{algorithm}.weighting: 'known' needs p_i^t, which trace "
                                  f"{experiment['trace']!r} (model {spec['model']!r}, distribution "
                                  f"{spec.get('distribution')!r}) does not store (experiment {name!r})")


def parse_checked_reports(config: dict) -> dict[str, Report]:
    """The `reports:` section (fedavail.plan.reports) parsed: kinds, keys and the experiments they read."""
    try:
        return parse_reports(config)
    except (ValueError, TypeError) as error:
        raise ConfigError(str(error)) from error
