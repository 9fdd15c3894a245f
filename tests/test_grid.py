"""Grid entries, algorithm sets and experiment patterns (fedavail.plan.grid): the paper configs written with them
expand to exactly the runs they had when written out by hand, and every malformed grid is an error naming its key."""

import json
import re
from pathlib import Path

import pytest

from fedavail.plan.errors import ConfigError
from fedavail.plan.grid import expand
from fedavail.plan.load import load_config
from fedavail.plan.plan import build_plan
from fedavail.plan.specs import as_json

from workflow_helpers import REPO

FIXTURES = Path(__file__).parent / "data"


def run_set(config: dict) -> dict:
    """Everything the jobs of a config depend on: each run's spec, each experiment's seeds and resolved partition
    and trace, and the reports. Run specs are stored once each (most runs share one but for their names and seed)."""
    runs, plan = {}, build_plan(config)
    for run in plan.runs():
        spec = json.loads(as_json(plan.run_spec(run)))
        assert (spec.pop("experiment"), spec.pop("algorithm_id"), spec.pop("seed")) == tuple(vars(run).values())
        runs[run.directory] = as_json(spec)
    shared = sorted(set(runs.values()))
    experiments = {
        name: {"seeds": list(e.seeds), "partition": e.partition, "trace": e.trace,
               "partition_spec": plan.partitions[e.partition], "trace_spec": plan.traces[e.trace]}
        for name, e in plan.experiments.items()}
    return {"runs": {directory: shared.index(spec) for directory, spec in runs.items()},
            "specs": [json.loads(spec) for spec in shared], "experiments": experiments,
            "reports": config.get("reports")}


@pytest.mark.parametrize("name", ["fast", "fedswe"])
def test_paper_config_expands_to_its_recorded_run_set(name):
    recorded = json.loads((FIXTURES / f"paper_runs_{name}.json").read_text())
    expanded = run_set(load_config([REPO / f"config/{name}.yaml"]))
    assert expanded["experiments"] == recorded["experiments"]
    assert expanded["reports"] == recorded["reports"]
    assert expanded["specs"] == recorded["specs"]
    assert expanded["runs"] == recorded["runs"]


def test_a_config_without_grids_or_sets_is_unchanged():
    config = load_config([REPO / "config/test.yaml"])
    assert expand(config) == config


def test_grid_cells_are_the_product_of_the_axes_named_by_the_template(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text(
        'partitions:\n'
        '  mnist_a{alpha}: {grid: {alpha: [0.1, 1]}, dataset: mnist5k, scheme: dirichlet, alpha: "{alpha}"}\n'
        '  digits_iid: {dataset: digits, scheme: iid}\n'
        'experiments:\n'
        '  e_a{alpha}_{trace}:\n'
        '    grid:\n'
        '      alpha: {0.1: {training: {rounds: 5}}, 1: {}}\n'
        '      trace: {slow: {training: {rounds: 9}}, fast: {}}\n'
        '    partition: "mnist_a{alpha}"\n'
        '    trace: "{trace}"\n'
        '    note: "α = {alpha} on {trace}, {{literal}}"\n'
        '    training: {rounds: 7, last_n: 1}\n')
    config = load_config([path])
    assert config["partitions"] == {
        "mnist_a0.1": {"dataset": "mnist5k", "scheme": "dirichlet", "alpha": 0.1},
        "mnist_a1": {"dataset": "mnist5k", "scheme": "dirichlet", "alpha": 1},
        "digits_iid": {"dataset": "digits", "scheme": "iid"}}
    experiments = config["experiments"]
    assert list(experiments) == ["e_a0.1_slow", "e_a0.1_fast", "e_a1_slow", "e_a1_fast"]  # first axis outermost
    # Overrides are deep-merged, a later axis winning; other keys of the same mapping stay.
    assert {name: e["training"] for name, e in experiments.items()} == {
        "e_a0.1_slow": {"rounds": 9, "last_n": 1}, "e_a0.1_fast": {"rounds": 5, "last_n": 1},
        "e_a1_slow": {"rounds": 9, "last_n": 1}, "e_a1_fast": {"rounds": 7, "last_n": 1}}
    assert experiments["e_a1_fast"] == {"partition": "mnist_a1", "trace": "fast", "note": "α = 1 on fast, {literal}",
                                        "training": {"rounds": 7, "last_n": 1}}


def test_algorithm_sets_nest_and_expand_in_experiments_and_reports():
    config = expand({
        "algorithms": {name: {"algorithm": "fedavg"} for name in ("a", "b", "c", "d")},
        "algorithm_sets": {"ab": ["a", "b"], "abc": ["ab", "c"]},
        "experiments": {"x": {"algorithms": "abc"}, "y": {"algorithms": ["d", "ab"]}},
        "reports": {"r": {"experiments": ["x"], "algorithms": ["c", "ab"]}}})
    assert "algorithm_sets" not in config
    assert config["experiments"] == {"x": {"algorithms": ["a", "b", "c"]}, "y": {"algorithms": ["d", "a", "b"]}}
    assert config["reports"]["r"]["algorithms"] == ["c", "a", "b"]


def test_claim_grids_and_all_of_grids_expand_into_plain_claims():
    claims = [
        {"claim": "k = 100 beats the others ({data})", "source": "Table 2", "grid": {"data": ["svhn", "cifar10"]},
         "check": {"all_of": {"grid": {"other": ["a", "b"]}, "check": {"greater": ["{data}/k100", "{data}/{other}"]}}},
         "paper": {"dataset": "{data}", "dynamics": "sine"}},
        {"claim": "as written: α ∈ {0.05, 1.0}", "source": "Table 9",
         "check": {"all_of": {"grid": {"e": ["x", "y"]}, "check": {"greater": ["{e}/a", "{e}/b"]}}}},
    ]
    config = expand({"reports": {"c": {"kind": "claims", "claims": claims}}})
    assert config["reports"]["c"]["claims"] == [
        {"claim": "k = 100 beats the others (svhn)", "source": "Table 2",
         "check": {"all_of": [{"greater": ["svhn/k100", "svhn/a"]}, {"greater": ["svhn/k100", "svhn/b"]}]},
         "paper": {"dataset": "svhn", "dynamics": "sine"}},
        {"claim": "k = 100 beats the others (cifar10)", "source": "Table 2",
         "check": {"all_of": [{"greater": ["cifar10/k100", "cifar10/a"]}, {"greater": ["cifar10/k100", "cifar10/b"]}]},
         "paper": {"dataset": "cifar10", "dynamics": "sine"}},
        {"claim": "as written: α ∈ {0.05, 1.0}", "source": "Table 9",
         "check": {"all_of": [{"greater": ["x/a", "x/b"]}, {"greater": ["y/a", "y/b"]}]}},
    ]


@pytest.mark.parametrize("claim, message", [
    ({"claim": "{x}", "grid": {"x": [1]}, "check": {"all_of": {"grid": {"x": [2]}, "check": {}}}},
     "reports.c.claims[0].check.all_of.grid: axis 'x' is already an axis of the enclosing grid"),
    ({"claim": "{y}", "grid": {"x": [1]}, "check": {}}, "reports.c.claims[0].claim: '{y}' uses {y}"),
    ({"claim": "c", "check": {"all_of": {"grid": {"x": [1]}}}},
     "reports.c.claims[0].check.all_of: a list of checks, or a mapping with `grid` and `check`"),
])
def test_malformed_claim_grids_name_the_key(claim, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        expand({"reports": {"c": {"kind": "claims", "claims": [claim]}}})


def test_report_experiments_take_patterns_and_exclusions_in_config_order():
    names = ["f_a1_uniform", "f_a1_beta", "f_a2_uniform", "f_a2_beta", "c_a1_beta"]
    config = expand({"experiments": {name: {} for name in names},
                     "reports": {"r": {"experiments": ["c_a1_beta", "f_*", "!*_uniform"]},
                                 "plain": {"experiments": ["f_a2_beta", "f_a1_beta"]}}})
    assert config["reports"]["r"]["experiments"] == ["c_a1_beta", "f_a1_beta", "f_a2_beta"]
    assert config["reports"]["plain"]["experiments"] == ["f_a2_beta", "f_a1_beta"]


ALGORITHMS = {"fedavg": {"algorithm": "fedavg"}, "fedprox": {"algorithm": "fedprox"}}


@pytest.mark.parametrize("config, message", [
    ({"experiments": {"e_{alpha}": {"grid": {"a": [1]}}}},
     "experiments.e_{alpha}: the name uses {alpha}, which is not an axis of its grid (axes: ['a'])"),
    ({"experiments": {"e_{a}": {"grid": {"a": [1]}, "partition": "p_{alhpa}"}}},
     "experiments.e_{a}.partition: 'p_{alhpa}' uses {alhpa}, which is not an axis of the grid"),
    ({"experiments": {"e_{a}": {"partition": "p"}}}, "experiments.e_{a}: a name with {fields} is a grid"),
    ({"experiments": {"e": {"grid": {"a": [1]}}}}, "experiments.e.grid: a grid entry's name needs a field per axis"),
    ({"experiments": {"e_{a}": {"grid": {"a": [1], "b": [1, 2]}}}},
     "experiments.e_{a}: two cells are named 'e_1'; the name needs a field for every axis"),
    ({"traces": {"t_{a}": {"grid": {"a": [1, 2]}}, "t_2": {}}},
     "traces.t_2: produces traces.t_2, which traces.t_{a} also defines"),
    ({"partitions": {"p_{a}": {"grid": {"a": {"0.05": {"alpha": 0.05}, "x": 3}}}}},
     "partitions.p_{a}.grid.a.x: overrides must be a mapping"),
    ({"partitions": {"p_{a}": {"grid": {"a": {"0.05": None}}}}},
     "partitions.p_{a}.grid.a.0.05: give the overrides as a mapping ({} for none)"),
    ({"partitions": {"p_{a}": {"grid": {"a": []}}}}, "partitions.p_{a}.grid.a: an axis needs at least one value"),
    ({"partitions": {"p_{a}": {"grid": {"a": [True]}}}}, "partitions.p_{a}.grid.a: axis value True must be"),
    ({"partitions": {"p_{a": {"grid": {"a": [1]}}}}, "partitions.p_{a: 'p_{a' is not a valid template"),
    ({"algorithms": ALGORITHMS, "experiments": {"e": {"algorithms": "fast_al"}}},
     "experiments.e.algorithms: 'fast_al' is not an algorithm set (sets: [])"),
    ({"algorithms": ALGORITHMS, "algorithm_sets": {"s": ["fedavg", "fedsgd"]},
      "experiments": {"e": {"algorithms": "s"}}},
     "experiments.e.algorithms: 'fedsgd' is neither an algorithm nor an algorithm set"),
    ({"algorithms": ALGORITHMS, "algorithm_sets": {"s": ["t"], "t": ["s"]}, "experiments": {"e": {"algorithms": "s"}}},
     "algorithm_sets.s: the set contains itself (s -> t -> s)"),
    ({"algorithms": ALGORITHMS, "algorithm_sets": {"fedavg": ["fedprox"]}},
     "algorithm_sets.fedavg: 'fedavg' is also an algorithm's name"),
    ({"algorithms": ALGORITHMS, "algorithm_sets": {"s": ["fedavg"]},
      "experiments": {"e": {"algorithms": ["s", "fedavg"]}}},
     "experiments.e.algorithms: fedavg listed more than once after expanding algorithm sets"),
    ({"experiments": {"x_1": {}}, "reports": {"r": {"experiments": ["y_*"]}}},
     "reports.r.experiments: pattern 'y_*' matches no experiment"),
    ({"experiments": {"x_1": {}}, "reports": {"r": {"experiments": ["x_*", "!*_2"]}}},
     "reports.r.experiments: '!*_2' excludes nothing listed before it"),
    ({"experiments": {"x_1": {}}, "reports": {"r": {"experiments": ["x_1", "x_*"]}}},
     "reports.r.experiments: x_1 listed more than once after expanding patterns"),
])
def test_malformed_grids_and_sets_are_errors_naming_the_key(config, message):
    with pytest.raises(ConfigError) as error:
        expand(config)
    assert str(error.value).startswith(message), str(error.value)


def test_a_grid_beyond_the_cell_limit_is_refused_before_it_expands():
    axes = {f"a{i}": [1, 2, 3] for i in range(11)}  # 177,147 cells
    name = "e" + "".join(f"_{{{axis}}}" for axis in axes)
    with pytest.raises(ConfigError, match=re.escape(
            f"experiments.{name}.grid: 177,147 cells ({' × '.join(['3'] * 11)}); a config's grids may have at most "
            f"MAX_GRID_CELLS = 10,000 cells in all")):
        expand({"experiments": {name: {"grid": axes}}})


def test_the_cell_limit_counts_every_grid_of_the_config():
    partitions = {"p_{a}": {"grid": {"a": list(range(6000))}}}
    with pytest.raises(ConfigError, match=re.escape("experiments.e_{b}.grid: 5,000 cells (5000); 6,000 cells of "
                                                       "grids before it; a config's grids may have at most")):
        expand({"partitions": partitions, "experiments": {"e_{b}": {"grid": {"b": list(range(5000))}}}})
    claim = {"claim": "{x}", "grid": {"x": list(range(200))},
             "check": {"all_of": {"grid": {"y": list(range(100))}, "check": {"greater": ["{x}", "{y}"]}}}}
    with pytest.raises(ConfigError, match=r"reports\.c\.claims\[0\]\.check\.all_of\.grid: 100 cells \(100\); "
                                             r"[0-9,]+ cells of grids before it"):
        expand({"reports": {"c": {"kind": "claims", "claims": [claim]}}})


def test_more_runs_than_the_limit_are_refused():
    config = {"seeds": list(range(50_001)), "algorithms": ALGORITHMS,
              "experiments": {"e": {"algorithms": ["fedavg", "fedprox"]}}}
    with pytest.raises(ConfigError, match=re.escape("experiments: 100,002 training runs (experiments × algorithms × "
                                                       "seeds), more than MAX_RUNS = 100,000")):
        expand(config)
    config["experiments"]["e"]["seeds"] = [0]
    expand(config)


@pytest.mark.parametrize("template, formatting", [
    ("e{a:0>300}", "':0>300'"), ("e{a:>400000000}", "':>400000000'"), ("e{a!r}", "'!r'"), ("e_{a!s:>3}", "'!s:>3'")])
def test_format_specs_and_conversions_in_grid_fields_are_refused_before_formatting(template, formatting):
    with pytest.raises(ConfigError, match=re.escape(f"experiments.{template}: {template!r} formats field 'a' with "
                                                       f"{formatting}; a field is a plain {{axis}}")):
        expand({"experiments": {template: {"grid": {"a": [1]}}}})
    with pytest.raises(ConfigError, match=re.escape(f"experiments.e_{{a}}.partition: {template!r} formats field")):
        expand({"experiments": {"e_{a}": {"grid": {"a": [1]}, "partition": template}}})


@pytest.mark.parametrize("path", sorted((REPO / "config").glob("*.yaml")), ids=lambda path: path.name)
def test_every_config_expands_within_the_limits(path):
    """No config uses a format spec, an overlong name or more cells or runs than the limits allow."""
    build_plan(load_config([path]))


@pytest.mark.parametrize("config, message", [
    ({"algorithms": ALGORITHMS, "algorithm_sets": {"s": [{"x": 1}]}},
     "algorithm_sets.s[0]: {'x': 1} is not the name of an algorithm or an algorithm set"),
    ({"algorithms": ALGORITHMS, "algorithm_sets": {"s": "fedavg"}},
     "algorithm_sets.s: must be a list of algorithm or set names, got str"),
    ({"algorithms": ALGORITHMS, "algorithm_sets": {3: ["fedavg"]}}, "algorithm_sets.3: a set's name must be a string"),
    ({"algorithms": ALGORITHMS, "algorithm_sets": {"s" * 101: ["fedavg"]}},
     "algorithm_sets.'sssssssss"),
    ({"algorithms": ALGORITHMS, "experiments": {"e": {"algorithms": ["fedavg", ["fedprox"]]}}},
     "experiments.e.algorithms[1]: ['fedprox'] is not the name of an algorithm or an algorithm set"),
    ({"algorithms": ALGORITHMS, "experiments": {"e": {"algorithms": ["fedavg"]}},
      "reports": {"r": {"experiments": ["e"], "algorithms": [None]}}},
     "reports.r.algorithms[0]: None is not the name of an algorithm or an algorithm set"),
    ({"algorithms": 5, "algorithm_sets": {"s": ["fedavg"]}}, "algorithms: must map names to entries, got int"),
    ({"experiments": ["e"]}, "experiments: must map names to entries, got list"),
    ({"experiments": {"e_{a}": {"grid": {1: [1]}}}},
     "experiments.e_{a}.grid: axis 1 must be a name (a string): {fields} name axes"),
    ({"experiments": {"e_{a}": {"grid": {"a": "x"}}}},
     "experiments.e_{a}.grid.a: an axis is a list of values or a mapping of value -> overrides, got str"),
    ({"experiments": {"e_{a}": {"grid": {"a": [[1]]}}}}, "experiments.e_{a}.grid.a: axis value [1] must be"),
])
def test_malformed_sets_and_axes_are_errors_naming_the_key_not_type_errors(config, message):
    with pytest.raises(ConfigError) as error:
        expand(config)
    assert str(error.value).startswith(message), str(error.value)
