"""The resolvers of a config's entries into the specs its jobs depend on (every default filled in, so a changed
default is a changed job; fedavail.plan.plan calls each once per entry), and a spec as a job's command line passes
it."""

import json
from dataclasses import asdict

from fedavail.partitions.schemes import resolve_partition
from fedavail.plan.local import resolve_local
from fedavail.plan.mappings import without


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


def local_spec(config: dict, experiment: str, algorithm: str) -> dict:
    """The run's local optimisation settings, resolved: the experiment's `training.local` with the algorithm's lr."""
    training = config["experiments"][experiment]["training"]
    lr = config["algorithms"][algorithm].get("lr")
    return resolve_local(training.get("local"), lr, f"experiments.{experiment}.training.local").as_dict()
