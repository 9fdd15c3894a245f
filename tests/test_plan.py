"""The plan layer's registries name what the torch side implements, its settings get their defaults from their
dataclasses, and its checks name the key path (the JSON schema is generated from it: tests/test_plan_docs.py)."""

import collections

import pytest
from workflow_helpers import REPO

from fedavail.algorithms import algorithm_class
from fedavail.availability import trace_models
from fedavail.availability.trace_models import TRACE_MODELS, TraceModel
from fedavail.data.prepare import BUNDLED_DATASETS, RAW_DATASETS
from fedavail.models import ARCHITECTURES
from fedavail.partitions.schemes import PARTITION_SCHEMES, Scheme
from fedavail.plan import algorithms as plan_algorithms
from fedavail.plan import checks
from fedavail.plan import names
from fedavail.plan.errors import ConfigError
from fedavail.plan.load import load_config, load_config_file
from fedavail.plan.names import MODEL_NAMES
from fedavail.plan.plan import build_plan


def test_every_registered_algorithm_has_its_behaviour_and_every_model_its_name():
    behaviours = sorted(path.stem for path in (REPO / "src/fedavail/algorithms").glob("*.py")
                        if path.stem not in ("__init__", "base"))
    assert list(plan_algorithms.known_algorithms()) == behaviours
    for name, options in plan_algorithms.algorithm_options().items():
        assert issubclass(algorithm_class(name), options)
        assert algorithm_class(name).hyperparameters() == options.hyperparameters()
    with pytest.raises(ValueError, match=r"unknown algorithm 'fedsgd'; known: \['f3ast', 'fast', "):
        algorithm_class("fedsgd")
    assert sorted(ARCHITECTURES) == MODEL_NAMES


def test_every_trace_model_and_partition_scheme_has_its_drawer():
    assert all(model.draw is not TraceModel.draw for model in TRACE_MODELS.values())
    assert all(scheme.split is not Scheme.split for scheme in PARTITION_SCHEMES.values())


def test_dataset_and_distribution_names_are_the_data_sides():
    assert names.BUNDLED_DATASETS == BUNDLED_DATASETS
    assert set(names.PAPER_DATASETS) == set(RAW_DATASETS)


def test_an_algorithm_gets_its_defaults_from_its_options():
    fedavg = plan_algorithms.resolve_algorithm("fedavg", {})
    assert (fedavg.weighting, fedavg.p_floor, fedavg.global_lr) == ("active", 0.02, 1.0)
    built = algorithm_class("fedavg")()
    assert (built.weighting, built.p_floor, built.global_lr) == ("active", 0.02, 1.0)
    with pytest.raises(ValueError, match=r"fedavg option 'weighting' must be one of \('active', 'all', 'known'\), "
                                         r"got 'some'"):
        plan_algorithms.resolve_algorithm("fedavg", {"weighting": "some"})


def test_the_settings_code_stays_simple():
    """radon: no block of the plan layer (the config checks included) and of the settings and stores of the stages
    before training above C (cyclomatic complexity 20)."""
    from radon.complexity import cc_visit

    sources = [*(REPO / "src/fedavail/plan").glob("*.py"), *(REPO / "src/fedavail/availability").glob("*.py"),
               *(REPO / "src/fedavail/partitions").glob("*.py"),
               *(REPO / "src/fedavail" / name for name in ("options.py", "data/prepared.py"))]
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
    (lambda c: c["algorithms"]["fedavg_active"].update(global_lr=0),
     r"algorithms\.fedavg_active: fedavg option 'global_lr' must be > 0, got 0"),
    (lambda c: c["experiments"]["tiny"].update(algorithms=[]), r"experiments\.tiny\.algorithms: must be a non-empty"),
    (lambda c: c["experiments"]["tiny"].update(seeds=[1, 1]), r"experiments\.tiny\.seeds: must be null or a non-empty"),
    (lambda c: c["experiments"]["tiny"]["training"]["local"].update(lr=-1),
     r"experiments\.tiny\.training\.local\.lr: must be > 0"),
    (lambda c: c["partitions"]["mnist5k_dir0.5"].update(scheme="iid"),
     r"partitions\.mnist5k_dir0\.5: partition spec key 'scheme': 'iid' is not one of \('client_dirichlet', "),
    (lambda c: c["traces"]["stationary"].update(model="weekly"),
     r"traces\.stationary: trace spec key 'model': 'weekly' is not one of \('fedswe', 'fast', "),
    (lambda c: c.update(reports={"r": {"kind": "heatmap", "experiments": ["tiny"]}}),
     r"reports\.r\.kind: 'heatmap' is not one of \('fedswe_table', 'sweep', "),
])
def test_errors_name_the_key_path_without_the_schema(edit, message):
    """The plan layer checks what the schema checks too, so a config read without the workflow fails the same."""
    config = load_config_file(REPO / "config/test.yaml")
    edit(config)
    with pytest.raises(ConfigError, match=message):
        build_plan(config)


def test_the_plan_resolves_each_entry_once(monkeypatch):
    """build_plan fills in each partition's, trace's and algorithm's defaults once, and each experiment × algorithm's
    training.local once; every job spec is then read from the Plan, never resolved again."""
    calls = collections.Counter()
    for name in ("partition_spec", "local_spec", "resolve_algorithm"):
        resolve = getattr(checks, name)
        monkeypatch.setattr(checks, name, lambda *args, _resolve=resolve, _name=name: calls.update([_name]) or
                            _resolve(*args))
    # Any trace spec resolved anywhere in building the plan (trace models resolve through resolve_variant)
    variant = trace_models.resolve_variant
    monkeypatch.setattr(trace_models, "resolve_variant", lambda spec, registry, *args: calls.update(
        ["trace"] * (registry is trace_models.TRACE_MODELS)) or variant(spec, registry, *args))
    config = load_config([REPO / "config/config.yaml"])
    plan = build_plan(config)
    specs = [plan.run_spec(run) for run in plan.runs()]
    runs = sum(len(e["algorithms"]) * len(e.get("seeds") or config["seeds"]) for e in config["experiments"].values())
    assert len(specs) == runs and plan.partitions and plan.traces
    assert calls == {"partition_spec": len(config["partitions"]), "trace": len(config["traces"]),
                     "resolve_algorithm": len(config["algorithms"]),
                     "local_spec": sum(len(e["algorithms"]) for e in config["experiments"].values())}
