"""The config's JSON schema, generated from the plan layer's settings: fedavail.plan.load.validate checks every config
against it, and fedavail.plan.docs writes it out as workflow/schemas/config.schema.yaml. Validation fills in the
defaults the schema states, so it states them exactly where jobs read the config as it is: execution, training and
training.augmentation. Every other block's defaults, and the value bounds of every setting, the plan layer fills in
and checks (fedavail.plan.plan.build_plan); the schema bounds only what no dataclass declares: the seeds, the dataset
options and an algorithm entry's own lr."""

import types
import typing
from dataclasses import MISSING, fields

import yaml

from fedavail.availability.trace_models import TRACE_MODELS
from fedavail.options import default_of
from fedavail.partitions.schemes import PARTITION_SCHEMES
from fedavail.plan.algorithms.base import AlgorithmOptions
from fedavail.plan.names import DATASETS
from fedavail.plan.experiments import AugmentationOptions, ExecutionOptions, ExperimentOptions, TrainingOptions
from fedavail.plan.local import LocalOptions
from fedavail.plan.reports import KINDS, Report

HEADER = ("# Generated from the plan layer (fedavail.plan.schema) by `python -m fedavail.plan.docs --write`: do not\n"
          "# edit. tests/test_plan_docs.py fails when it is out of date.\n")

_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean", list: "array", tuple: "array",
               dict: "object", type(None): "null"}


def value_schema(hint) -> dict:
    """The JSON schema of an annotation: its types, and the type of a list's items or a mapping's values. A list of
    strings names entries (experiments, algorithms), each at most once."""
    parts = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    schema = {"type": _type([_JSON_TYPES[typing.get_origin(part) or part] for part in parts])}
    for part in parts:
        origin, args = typing.get_origin(part), typing.get_args(part)
        if origin in (list, tuple) and args:
            schema["items"] = value_schema(args[0])
            if args[0] is str:
                schema["uniqueItems"] = True
        elif origin is dict and args:
            schema["additionalProperties"] = value_schema(args[1])
    return schema


def _type(kinds: list[str]):
    """A schema's `type`: the one type, or the list of them."""
    return kinds[0] if len(kinds) == 1 else kinds


def block(cls, fill_defaults: bool = False, nested: dict | None = None, optional: tuple[str, ...] = (),
          null_given: bool = False) -> dict:
    """Dataclass `cls` as a closed mapping, the settings without a default required but those in `optional` (given
    elsewhere in the config). `nested`: setting -> the schema of its block, which states the setting's default (an
    empty mapping) only where that block fills in its own defaults. A setting whose default is null is left out to
    mean it, unless `null_given`: the config is also read as written (fedavail.plan.specs.stated_trace,
    fedavail.plan.plan.experiment_seeds, the grids), where an explicit null would not stand for the default."""
    hints = typing.get_type_hints(cls)
    properties = {}
    for f in fields(cls):
        default = default_of(f)
        if f.name in (nested or {}):
            schema = dict(nested[f.name])
            if default is not MISSING and any("default" in prop for prop in nested[f.name]["properties"].values()):
                schema["default"] = default
        else:
            schema = {"enum": list(f.metadata["choices"])} if f.metadata.get("choices") else value_schema(hints[f.name])
            if default is None and not null_given and isinstance(schema.get("type"), list):
                schema["type"] = _type([kind for kind in schema["type"] if kind != "null"])
            if fill_defaults and default is not MISSING:
                schema["default"] = default
        if f.metadata.get("doc"):
            schema["description"] = f.metadata["doc"]
        properties[f.name] = schema
    required = [f.name for f in fields(cls) if default_of(f) is MISSING and f.name not in optional]
    return {"type": "object", "properties": properties, **({"required": required} if required else {}),
            "additionalProperties": False}


def variants(tag: str, registry: dict, required: tuple[str, ...], common: dict | None = None) -> dict:
    """An entry whose `tag` names one of the dataclasses in `registry`: the settings of all of them, each allowing
    what any variant allows (which keys a variant takes, and their bounds, the plan layer checks)."""
    properties = {**(common or {}), tag: {"enum": list(registry)}}
    for cls in registry.values():
        for key, schema in block(cls)["properties"].items():
            properties[key] = _merged(properties.get(key), schema)
    return {"type": "object", "properties": properties, "required": list(required)}


def _merged(known: dict | None, other: dict) -> dict:
    """Two variants' schemas of one key: their allowed values or types together, the first one's meaning."""
    if known is None:
        return other
    if "enum" in known and "enum" in other:
        return {**known, "enum": known["enum"] + [value for value in other["enum"] if value not in known["enum"]]}
    kinds = [kind for schema in (known, other) for kind in json_types(schema)]
    merged = {**other, **known, "type": _type(list(dict.fromkeys(kinds)))}
    merged.pop("enum", None)
    return merged


def json_types(schema: dict) -> list[str]:
    if "enum" in schema:
        return list(dict.fromkeys(_JSON_TYPES[type(value)] for value in schema["enum"]))
    return schema["type"] if isinstance(schema["type"], list) else [schema["type"]]


def _named(entry: dict, description: str) -> dict:
    return {"type": "object", "minProperties": 1, "description": description, "additionalProperties": entry}


def algorithm_entry() -> dict:
    """An algorithm entry: its name, its own lr and the settings every algorithm takes; its own settings the plan
    layer checks (fedavail.plan.algorithms.check_hyperparameters), so adding an algorithm changes nothing here."""
    common = block(AlgorithmOptions)["properties"]
    return {"type": "object",
            "properties": {"algorithm": {"type": "string", "description": "a registered algorithm"},
                           "lr": {"type": "number", "exclusiveMinimum": 0,
                                  "description": "this algorithm's initial local learning rate η0 (overrides "
                                                 "training.local.lr)"},
                           "label": {"type": "string", "minLength": 1,
                                     "description": "what tables and figures call this entry; default: its "
                                                    "algorithm's label, with the settings that tell it apart from "
                                                    "other entries of the same label"},
                           **common},
            "required": ["algorithm"]}


def generate() -> dict:
    # training.local's lr may be each algorithm entry's own; the block is read only through
    # fedavail.plan.local.resolve_local, where a null is the default.
    local = block(LocalOptions, optional=("lr",), null_given=True)
    training = block(TrainingOptions, fill_defaults=True,
                     nested={"local": local, "augmentation": block(AugmentationOptions, fill_defaults=True)})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "description": "fedavail configuration: datasets are prepared, partitioned per seed, availability traces drawn "
                       "per seed, and every experiment trains each of its algorithms for each seed on the same "
                       "partition and trace. docs/configuration.md describes every key.",
        "type": "object",
        "properties": {
            "seeds": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "uniqueItems": True,
                      "description": "every experiment runs once per seed; partitions and traces are drawn per seed"},
            "execution": {**block(ExecutionOptions, fill_defaults=True), "default": {},
                          "description": ExecutionOptions.__doc__.split(": ", 1)[1]},
            "datasets": {"type": "object", "description": "per-dataset preparation options, keyed by dataset name",
                         "additionalProperties": {
                             "type": "object",
                             "properties": {"num_clients": {"type": "integer", "minimum": 1,
                                                            "description": "text datasets: roles kept as clients"},
                                            "min_samples": {"type": "integer", "minimum": 1,
                                                            "description": "text datasets: smaller roles dropped"}}}},
            "partitions": _named(variants("scheme", PARTITION_SCHEMES, ("dataset", "scheme"),
                                          {"dataset": {"enum": list(DATASETS)}}), "named partitions"),
            "traces": _named(variants("model", TRACE_MODELS, ("model", "rounds")), "named availability traces"),
            "algorithms": _named(algorithm_entry(), "named algorithm settings; experiments list these names"),
            "experiments": _named(block(ExperimentOptions, nested={"training": training}), "named experiments"),
            "reports": {"type": "object", "default": {},
                        "description": "cross-experiment tables and figures, keyed by name, each written to "
                                       "results/reports/<name>/; each kind's keys are the fields of its spec in "
                                       "fedavail.plan.reports (KINDS)",
                        "additionalProperties": {"type": "object", "properties": {**block(Report)["properties"],
                                                                                 "kind": {"enum": sorted(KINDS)}},
                                                 "required": ["kind"]}},
        },
        "required": ["seeds", "partitions", "traces", "algorithms", "experiments"],
        "additionalProperties": False,
    }


def text() -> str:
    return HEADER + yaml.safe_dump(generate(), sort_keys=False, allow_unicode=True, width=120)
