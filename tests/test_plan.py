"""The plan layer's registries name what the torch side implements, and the JSON schema agrees with its settings:
every setting is a schema key, every default the schema states is the setting's default, every enum the same."""

from dataclasses import MISSING, fields

import pytest
import yaml

from fedavail.algorithms import ALGORITHMS
from fedavail.availability import models as availability_models
from fedavail.data.prepare import BUNDLED_DATASETS, RAW_DATASETS
from fedavail.models import ARCHITECTURES
from fedavail.plan import algorithms as plan_algorithms
from fedavail.plan import config as plan_config
from fedavail.plan.experiments import Augmentation, Execution, Experiment, Training
from fedavail.plan.local import LocalOptions
from fedavail.plan.models import MODEL_NAMES
from fedavail.plan.options import default_of
from fedavail.plan.partitions import ALLOCATIONS, PARTITION_SCHEMES
from fedavail.plan.traces import FAST_DISTRIBUTIONS, TRACE_MODELS

from workflow_helpers import REPO

SCHEMA = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())["properties"]
ENTRY = {section: SCHEMA[section]["additionalProperties"]["properties"]
         for section in ("partitions", "traces", "algorithms", "experiments")}
TRAINING = ENTRY["experiments"]["training"]["properties"]


def test_algorithm_and_model_registries_have_the_plan_layers_names():
    assert list(ALGORITHMS) == list(plan_algorithms.ALGORITHM_OPTIONS)
    for name, cls in ALGORITHMS.items():
        assert issubclass(cls, plan_algorithms.ALGORITHM_OPTIONS[name])
        assert cls.hyperparameters() == plan_algorithms.ALGORITHM_OPTIONS[name].hyperparameters()
    assert sorted(ARCHITECTURES) == MODEL_NAMES


def test_every_trace_model_and_partition_scheme_has_its_drawer():
    from fedavail.availability.traces import DRAWERS
    from fedavail.data.partition import SPLITS

    assert set(DRAWERS) == set(TRACE_MODELS)
    assert set(SPLITS) == set(PARTITION_SCHEMES)


def test_dataset_and_distribution_names_are_the_data_sides():
    assert plan_config.BUNDLED_DATASETS == BUNDLED_DATASETS
    assert set(plan_config.PAPER_DATASETS) == set(RAW_DATASETS)
    assert FAST_DISTRIBUTIONS == ("uniform", *availability_models.SKEWED_DISTRIBUTIONS)


def test_an_algorithm_gets_its_defaults_from_its_options():
    fedavg = plan_algorithms.resolve_algorithm("fedavg", {})
    assert (fedavg.weighting, fedavg.p_floor, fedavg.global_lr) == ("active", 0.02, 1.0)
    built = ALGORITHMS["fedavg"]()
    assert (built.weighting, built.p_floor, built.global_lr) == ("active", 0.02, 1.0)
    with pytest.raises(ValueError, match="'weighting': 'some' is not one of"):
        plan_algorithms.resolve_algorithm("fedavg", {"weighting": "some"})


def union_of_fields(registry: dict) -> dict:
    """name -> the fields of that name across the variants."""
    found = {}
    for cls in registry.values():
        for f in fields(cls):
            found.setdefault(f.name, []).append(f)
    return found


def agrees(schema_properties: dict, settings: dict) -> None:
    """Every setting is a schema key; a schema default is every variant's default; a schema enum is the union of
    the variants' choices."""
    for name, variants in settings.items():
        assert name in schema_properties, name
        prop = schema_properties[name]
        if "default" in prop:
            assert all(default_of(f) == prop["default"] for f in variants), name
        choices = {choice for f in variants for choice in f.metadata.get("choices", ())}
        if choices:
            assert set(prop["enum"]) == choices, name


def test_partitions_schema_agrees_with_the_schemes():
    agrees(ENTRY["partitions"], union_of_fields(PARTITION_SCHEMES))
    assert set(ENTRY["partitions"]) == {"dataset", "scheme", *union_of_fields(PARTITION_SCHEMES)}
    assert ENTRY["partitions"]["scheme"]["enum"] == list(PARTITION_SCHEMES)
    assert ENTRY["partitions"]["dataset"]["enum"] == list(plan_config.DATASETS)
    assert ENTRY["partitions"]["allocation"]["enum"] == list(ALLOCATIONS)


def test_traces_schema_agrees_with_the_trace_models():
    agrees(ENTRY["traces"], union_of_fields(TRACE_MODELS))
    assert set(ENTRY["traces"]) == {"model", *union_of_fields(TRACE_MODELS)}
    assert ENTRY["traces"]["model"]["enum"] == list(TRACE_MODELS)


def test_algorithms_schema_agrees_with_the_algorithm_options():
    assert ENTRY["algorithms"]["algorithm"]["enum"] == list(plan_algorithms.ALGORITHM_OPTIONS)
    agrees(ENTRY["algorithms"], union_of_fields({"base": plan_algorithms.AlgorithmOptions}))


@pytest.mark.parametrize("cls, properties, schema_fills_defaults", [
    (Experiment, ENTRY["experiments"], False),
    (Training, TRAINING, True),
    (LocalOptions, TRAINING["local"]["properties"], False),
    (Augmentation, TRAINING["augmentation"]["properties"], True),
    (Execution, SCHEMA["execution"]["properties"], True),
])
def test_experiment_and_execution_schema_agrees_with_the_settings(cls, properties, schema_fills_defaults):
    """Where the workflow's schema validation fills defaults in (set_default), it states every one; elsewhere it
    states none, and the plan layer fills them in."""
    assert set(properties) == {f.name for f in fields(cls)}
    agrees(properties, {f.name: [f] for f in fields(cls)})
    for f in fields(cls):
        stated = "default" in properties[f.name]
        fillable = default_of(f) is not MISSING and f.name != "local"
        assert stated == (schema_fills_defaults and fillable), f.name


def test_model_names_are_the_schemas():
    assert TRAINING["model"]["enum"] == MODEL_NAMES


def test_the_settings_code_stays_simple():
    """radon: no block of the plan layer or the config checks above C (cyclomatic complexity 20)."""
    from radon.complexity import cc_visit

    sources = [*(REPO / "src/fedavail/plan").glob("*.py"),
               *(REPO / "src/fedavail" / name for name in ("config.py", "config_checks.py", "specs.py",
                                                           "data/partition.py", "data/prepared.py",
                                                           "availability/traces.py"))]
    complex_blocks = [f"{path.name}:{block.name} ({block.complexity})" for path in sources
                      for block in cc_visit(path.read_text(encoding="utf-8")) if block.complexity > 20]
    assert not complex_blocks


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["experiments"]["tiny"]["training"].update(eval_every=0),
     r"experiments\.tiny\.training\.eval_every: must be an integer >= 1, got 0"),
    (lambda c: c["experiments"]["tiny"]["training"].update(augmentation={"crop_padding": -1}),
     r"experiments\.tiny\.training\.augmentation\.crop_padding: must be an integer >= 0"),
    (lambda c: c["experiments"]["tiny"]["training"].update(epochs=1),
     r"experiments\.tiny\.training\.epochs: unknown key"),
    (lambda c: c["experiments"]["tiny"].pop("trace"), r"experiments\.tiny\.trace: missing"),
    (lambda c: c.update(execution={"log_every": 0}), r"execution\.log_every: must be an integer >= 1"),
    (lambda c: c["partitions"]["mnist5k_dir0.5"].update(dataset="mnist"), r"partitions\.mnist5k_dir0\.5\.dataset"),
    (lambda c: c["partitions"]["mnist5k_dir0.5"].update(alpha=0), r"partitions\.mnist5k_dir0\.5: .*'alpha' must be"),
    (lambda c: c["partitions"]["mnist5k_dir0.5"].update(scheme="iid"),
     r"partitions\.mnist5k_dir0\.5: partition spec key 'scheme': 'iid' is not one of \('client_dirichlet', "),
    (lambda c: c["traces"]["stationary"].update(model="weekly"),
     r"traces\.stationary: trace spec key 'model': 'weekly' is not one of \('fedswe', 'fast', "),
    (lambda c: c.update(reports={"r": {"kind": "heatmap", "experiments": ["tiny"]}}),
     r"reports\.r\.kind: 'heatmap' is not one of \('fedswe_table', 'sweep', "),
])
def test_errors_name_the_key_path_without_the_schema(edit, message):
    """The plan layer checks what the schema checks too, so a config read without the workflow fails the same."""
    import fedavail.config as fc
    from fedavail.config_yaml import load_config_file

    config = load_config_file(REPO / "config/test.yaml")
    edit(config)
    with pytest.raises(fc.ConfigError, match=message):
        fc.check(config)
