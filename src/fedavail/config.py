"""What the schema cannot say about a config, and the expansion of experiments into jobs: the entry point the
Snakefile, the CLI and the tests share, so a config is checked the same way everywhere, before any job starts. The
settings themselves, their defaults and checks are the torch-free plan layer (fedavail.plan)."""

import json

from fedavail.config_checks import check_combinations, check_finite, check_names
from fedavail.plan.config import (BUNDLED_DATASETS, MAX_MESSAGE_LENGTH, PAPER_DATASETS, ConfigError, Run,
                                  check_entries, cut, dataset_spec, experiment_seeds, local_spec, partition_spec,
                                  run_spec, runs, shorten, trace_needs_partition, trace_spec)

__all__ = ["BUNDLED_DATASETS", "PAPER_DATASETS", "ConfigError", "Run", "as_json", "check", "check_reports",
           "dataset_spec", "experiment_seeds", "local_spec", "partition_spec", "report_spec",
           "run_spec", "runs", "schema_problem", "trace_needs_partition", "trace_spec"]


def check(config: dict) -> None:
    """Raise ConfigError naming the first key whose value cannot run."""
    check_names(config)
    check_finite(config)
    check_entries(config)
    check_combinations(config)
    check_reports(config)


def schema_problem(error) -> str:
    """A JSON-schema validation error as `<key>: <problem>`, the offending value shortened (the validator's own text
    repeats it, whatever its size, and its part of the schema)."""
    key = ".".join(str(part) for part in error.absolute_path) or "config"
    return cut(f"{key}: {error.message.replace(repr(error.instance), shorten(error.instance))}", MAX_MESSAGE_LENGTH)


def check_reports(config: dict) -> None:
    """The `reports:` section (fedavail.plan.reports): kinds, keys and the experiments they read."""
    from fedavail.plan.reports import parse_reports

    try:
        parse_reports(config)
    except (ValueError, TypeError) as error:
        raise ConfigError(str(error)) from error


def report_spec(config: dict, experiment: str) -> dict:
    """Exactly what the per-experiment table and figure depend on (fedavail.plan.reports.experiment_job)."""
    from fedavail.plan.reports import experiment_job

    return experiment_job(config, experiment)


def as_json(obj) -> str:
    return json.dumps(obj, sort_keys=True)
